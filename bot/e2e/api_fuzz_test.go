package e2e_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/baton-bot/baton/core/llmtest"
)

// FuzzAPITaskRequests: whatever body a client sends to the task API's
// endpoints that take one, the answer is a JSON object with a 2xx or 4xx
// status, never a 5xx or a panic, and never a workspace path.
func FuzzAPITaskRequests(f *testing.F) {
	for _, seed := range []string{
		`{"text":"hello"}`,
		`{"text":"hello","piece":"research"}`,
		`{"text":"x","piece":"../../etc"}`,
		`{"text":""}`,
		`{"text":"a","extra":1}`,
		`{"text":1}`,
		`{"text":"a"}{"text":"b"}`,
		`[]`,
		`null`,
		"{\"text\":\"\\u0000\\ud800\"}",
		"",
	} {
		f.Add(uint8(0), seed)
		f.Add(uint8(1), seed)
	}
	w := newAPIWorld(f, apiSetup{token: apiToken})
	w.llm.Handle(func(llmtest.Request) llmtest.Step { return llmtest.Transition("COMPLETE", "ok") })
	id := w.create(`{"text":"the task the comments go to"}`)
	f.Fuzz(func(t *testing.T, which uint8, body string) {
		path := "/api/tasks"
		if which%2 == 1 {
			path = "/api/tasks/" + apiItoa(id) + "/comments"
		}
		req, err := http.NewRequest(http.MethodPost, w.url+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+apiToken)
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(res.Body)
		res.Body.Close()
		var obj map[string]any
		if res.StatusCode >= 500 || json.Unmarshal(raw, &obj) != nil {
			t.Errorf("POST %s %q = %d %s", path, body, res.StatusCode, raw)
		}
		if strings.Contains(string(raw), w.wsRoot) {
			t.Errorf("POST %s %q gave away the workspace root: %s", path, body, raw)
		}
	})
}
