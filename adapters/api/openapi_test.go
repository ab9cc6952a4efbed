package api

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-bot/baton/core"
)

// openAPISchemas names the Go type of each schema of openapi.json.
var openAPISchemas = map[string]any{
	"Error":           errorBody{},
	"TaskRequest":     request{},
	"DecisionRequest": decisionRequest{},
	"JobState":        core.JobState(""),
	"Task":            taskView{},
	"TaskInfo":        taskInfo{},
	"Job":             jobView{},
	"Comment":         commentView{},
	"Approval":        approvalView{},
	"TaskList":        taskList{},
	"TaskSummary":     taskSummary{},
	"FileList":        fileList{},
	"File":            fileView{},
}

// oaSchema is the part of a JSON Schema the test reads.
type oaSchema struct {
	Ref        string              `json:"$ref"`
	Type       string              `json:"type"`
	Format     string              `json:"format"`
	Enum       []string            `json:"enum"`
	Items      *oaSchema           `json:"items"`
	Properties map[string]oaSchema `json:"properties"`
}

type oaContent map[string]struct {
	Schema oaSchema `json:"schema"`
}

type oaOperation struct {
	OperationID string `json:"operationId"`
	RequestBody *struct {
		Content oaContent `json:"content"`
	} `json:"requestBody"`
	Responses map[string]struct {
		Ref     string    `json:"$ref"`
		Content oaContent `json:"content"`
	} `json:"responses"`
}

type oaDoc struct {
	OpenAPI    string                                `json:"openapi"`
	Paths      map[string]map[string]json.RawMessage `json:"paths"`
	Components struct {
		Schemas map[string]oaSchema `json:"schemas"`
	} `json:"components"`
}

func loadOpenAPI(t *testing.T) oaDoc {
	t.Helper()
	var doc oaDoc
	if err := json.Unmarshal(openAPIDoc, &doc); err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.") {
		t.Fatalf("openapi = %q, want 3.x", doc.OpenAPI)
	}
	return doc
}

// operations returns the document's operations by "METHOD path".
func (d oaDoc) operations(t *testing.T) map[string]oaOperation {
	t.Helper()
	ops := map[string]oaOperation{}
	for p, item := range d.Paths {
		for method, raw := range item {
			if method == "parameters" {
				continue
			}
			var op oaOperation
			if err := json.Unmarshal(raw, &op); err != nil {
				t.Fatalf("%s %s: %v", method, p, err)
			}
			ops[strings.ToUpper(method)+" "+p] = op
		}
	}
	return ops
}

// docPath is the OpenAPI path of a ServeMux pattern: "{path...}" is
// "{path}".
func docPath(pattern string) string { return strings.ReplaceAll(pattern, "...}", "}") }

// schemaName is the schema that openAPISchemas gives v's type, or "".
func schemaName(v any) string {
	if v == nil {
		return ""
	}
	for name, s := range openAPISchemas {
		if reflect.TypeOf(s) == reflect.TypeOf(v) {
			return name
		}
	}
	return "?" + reflect.TypeOf(v).String()
}

const schemaRef = "#/components/schemas/"

// TestOpenAPIRoutes: the document has exactly the operations routes
// serves, each with the request and success bodies of its handler.
func TestOpenAPIRoutes(t *testing.T) {
	doc := loadOpenAPI(t)
	ops := doc.operations(t)
	var served []string
	for _, rt := range routes {
		key := rt.method + " " + docPath(rt.pattern)
		served = append(served, key)
		op, ok := ops[key]
		if !ok {
			t.Errorf("the API serves %s; openapi.json does not list it", key)
			continue
		}
		var gotReq string
		if op.RequestBody != nil {
			gotReq = strings.TrimPrefix(op.RequestBody.Content["application/json"].Schema.Ref, schemaRef)
		}
		if want := schemaName(rt.request); gotReq != want {
			t.Errorf("%s: request body %q, want %q", key, gotReq, want)
		}
		var codes []string
		for code := range op.Responses {
			codes = append(codes, code)
		}
		slices.Sort(codes)
		wantResp := schemaName(rt.response)
		success := 0
		for _, code := range codes {
			r := op.Responses[code]
			if code[0] != '2' {
				if r.Ref != "#/components/responses/Error" {
					t.Errorf("%s: response %s is not the Error response", key, code)
				}
				continue
			}
			success++
			got := strings.TrimPrefix(r.Content["application/json"].Schema.Ref, schemaRef)
			if got != wantResp {
				t.Errorf("%s: response %s body %q, want %q", key, code, got, wantResp)
			}
		}
		if success == 0 {
			t.Errorf("%s: no success response", key)
		}
		if _, ok := op.Responses["401"]; !ok {
			t.Errorf("%s: no 401 response (every route needs the token)", key)
		}
	}
	for key := range ops {
		if !slices.Contains(served, key) {
			t.Errorf("openapi.json lists %s; the API does not serve it", key)
		}
	}
}

// TestOpenAPISchemas: every schema's properties are the JSON fields of its
// Go type, each of the type the field's Go type says, and every struct the
// bodies hold has a schema.
func TestOpenAPISchemas(t *testing.T) {
	doc := loadOpenAPI(t)
	for name := range doc.Components.Schemas {
		if _, ok := openAPISchemas[name]; !ok {
			t.Errorf("schema %s names no Go type (openAPISchemas)", name)
		}
	}
	for name, v := range openAPISchemas {
		s, ok := doc.Components.Schemas[name]
		if !ok {
			t.Errorf("openapi.json has no schema %s (%T)", name, v)
			continue
		}
		typ := reflect.TypeOf(v)
		if typ.Kind() != reflect.Struct {
			checkSchema(t, name, s, typ, false)
			continue
		}
		if s.Type != "object" {
			t.Errorf("schema %s: type %q, want object", name, s.Type)
		}
		var fields, props []string
		for f := range typ.Fields() {
			tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if tag == "" || tag == "-" {
				t.Errorf("%s.%s has no json name", typ, f.Name)
				continue
			}
			fields = append(fields, tag)
			if p, ok := s.Properties[tag]; ok {
				checkSchema(t, name+"."+tag, p, f.Type, true)
			}
		}
		for p := range s.Properties {
			props = append(props, p)
		}
		slices.Sort(fields)
		slices.Sort(props)
		if diff := cmp.Diff(fields, props); diff != "" {
			t.Errorf("schema %s properties, against the JSON fields of %s (-go +openapi):\n%s", name, typ, diff)
		}
	}
}

// checkSchema fails when s does not describe Go type typ; a type that has
// a schema of its own must be a $ref to it when ref is set.
func checkSchema(t *testing.T, at string, s oaSchema, typ reflect.Type, ref bool) {
	t.Helper()
	if name := schemaName(reflect.Zero(typ).Interface()); ref && !strings.HasPrefix(name, "?") {
		if s.Ref != schemaRef+name {
			t.Errorf("%s: want $ref %s%s, got %+v", at, schemaRef, name, s)
		}
		return
	}
	want := ""
	switch {
	case typ == reflect.TypeOf(time.Time{}):
		if s.Type != "string" || s.Format != "date-time" {
			t.Errorf("%s: %s is a date-time string, got %+v", at, typ, s)
		}
		return
	case typ == reflect.TypeOf(core.JobState("")):
		var states []string
		for _, st := range core.JobStates {
			states = append(states, string(st))
		}
		if diff := cmp.Diff(states, s.Enum); diff != "" {
			t.Errorf("%s: enum (-core.JobStates +openapi):\n%s", at, diff)
		}
		want = "string"
	case typ == reflect.TypeOf(core.Role("")):
		if diff := cmp.Diff([]string{string(core.RoleUser), string(core.RoleBot)}, s.Enum); diff != "" {
			t.Errorf("%s: enum (-roles +openapi):\n%s", at, diff)
		}
		want = "string"
	case typ.Kind() == reflect.String:
		want = "string"
	case typ.Kind() >= reflect.Int && typ.Kind() <= reflect.Uint64:
		want = "integer"
	case typ.Kind() == reflect.Bool:
		want = "boolean"
	case typ.Kind() == reflect.Slice:
		if s.Type != "array" || s.Items == nil {
			t.Errorf("%s: %s is an array, got %+v", at, typ, s)
			return
		}
		checkSchema(t, at+"[]", *s.Items, typ.Elem(), true)
		return
	default:
		t.Errorf("%s: %s has no schema of its own (add it to openapi.json and openAPISchemas)", at, typ)
		return
	}
	if s.Type != want {
		t.Errorf("%s: %s is %s in JSON, openapi.json says %+v", at, typ, want, s)
	}
}

// listStore is the part of the store the probe reaches: no task exists.
type listStore struct{ Store }

func (listStore) Task(context.Context, int64) (core.Task, error) {
	return core.Task{}, fmt.Errorf("task: %w", core.ErrNotFound)
}

func (listStore) Tasks(context.Context, core.TaskFilter) ([]core.Task, error) { return nil, nil }

// TestOpenAPIServed: the handler answers every operation of the document
// (never "nothing here" nor 405), answers every other method on its paths
// 405 with an Allow header of the document's methods, and serves the
// document itself.
func TestOpenAPIServed(t *testing.T) {
	doc := loadOpenAPI(t)
	srv := httptest.NewServer(New(nil, listStore{}, Config{Token: "t0ken"}).Handler())
	t.Cleanup(srv.Close)
	do := func(method, path string) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequest(method, srv.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer t0ken")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res, string(b)
	}
	concrete := strings.NewReplacer("{id}", "1", "{approval}", "2", "{folder}", "output", "{path}", "a/b.txt")
	for p, item := range doc.Paths {
		var methods []string
		for m := range item {
			if m == "parameters" {
				continue
			}
			m = strings.ToUpper(m)
			methods = append(methods, m)
			if m == "GET" {
				methods = append(methods, "HEAD")
			}
			res, body := do(m, concrete.Replace(p))
			if res.StatusCode == http.StatusMethodNotAllowed || strings.Contains(body, "There is nothing at") {
				t.Errorf("%s %s: %d %s; the document lists it", m, p, res.StatusCode, body)
			}
		}
		slices.Sort(methods)
		for _, m := range []string{"GET", "POST", "PUT", "PATCH", "DELETE"} {
			if slices.Contains(methods, m) {
				continue
			}
			res, body := do(m, concrete.Replace(p))
			if res.StatusCode != http.StatusMethodNotAllowed || res.Header.Get("Allow") != strings.Join(methods, ", ") {
				t.Errorf("%s %s: %d Allow %q %s; want 405 Allow %q", m, p, res.StatusCode, res.Header.Get("Allow"), body, strings.Join(methods, ", "))
			}
		}
	}
	res, body := do("GET", "/api/openapi.json")
	if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "application/json" || body != string(openAPIDoc) {
		t.Errorf("GET /api/openapi.json: %d %q, want the document", res.StatusCode, res.Header.Get("Content-Type"))
	}
}
