package llm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"

	openai "github.com/sashabaranov/go-openai"
)

// freshBody encodes req whole, every message afresh: the body Baton sent
// before it kept the messages' encodings, and the reference the cached
// body must equal byte for byte.
func freshBody(t *testing.T, req Request, wreq openai.ChatCompletionRequest, numCtx int) []byte {
	t.Helper()
	b := bodyRequest{Model: wreq.Model, MaxTokens: wreq.MaxTokens, MaxCompletionTokens: wreq.MaxCompletionTokens,
		Messages: make([]bodyMessage, len(req.Messages))}
	if numCtx > 0 {
		b.Options = &bodyOllama{NumCtx: numCtx}
	}
	if s, ok := wreq.ToolChoice.(string); ok {
		b.ToolChoice = s
	}
	for i, m := range req.Messages {
		bm, err := bodyMessageOf(m)
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		b.Messages[i] = bm
	}
	for _, d := range req.Tools {
		params := d.Parameters
		if len(params) == 0 {
			params = emptySchema
		}
		b.Tools = append(b.Tools, bodyTool{Type: "function", Function: bodyFunctionDef{Name: d.Name, Description: d.Description, Parameters: params}})
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(b); err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// sent returns what the transport sends of b, checking that every way of
// reading it — small reads, whole pieces written, the joined copy — gives
// the same bytes, Len of them.
func sent(t *testing.T, b *Body) []byte {
	t.Helper()
	small, err := io.ReadAll(iotest.OneByteReader(b.Reader()))
	if err != nil {
		t.Fatal(err)
	}
	var written bytes.Buffer
	if _, err := io.Copy(&written, b.Reader()); err != nil { // through WriteTo
		t.Fatal(err)
	}
	if err := iotest.TestReader(b.Reader(), small); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(written.Bytes(), small) || !bytes.Equal(b.Bytes(), small) {
		t.Fatalf("the body reads differently in small reads, written whole and joined:\n%s\n%s\n%s", small, written.Bytes(), b.Bytes())
	}
	if len(small) != b.Len() {
		t.Fatalf("body of %d bytes has Len %d", len(small), b.Len())
	}
	return small
}

// TestCachedBodyMatchesFresh: over a movement's life — messages appended,
// tool results masked in place, calls and images changed in place in the
// caller's slices, the history compacted into a summary, equal text in
// new strings, the cache pressed past its bound — every body built from
// the cache equals the whole request encoded afresh, and the turns after
// the first find the earlier messages in the cache.
func TestCachedBodyMatchesFresh(t *testing.T) {
	img := []byte("\x89PNG\r\n\x1a\nfirst image")
	msgs := []Message{
		{Role: RoleSystem, Content: "You are careful. <b>HTML</b> & \"quotes\" \u2028 日本語"},
		{Role: RoleUser, Content: "Look at this", Parts: []Part{{Type: PartText, Text: "a <diagram>"}, {Type: PartImage, ImageMIME: "image/png", ImageData: img}}},
	}
	for i := range 6 {
		id := fmt.Sprint("call_", i)
		msgs = append(msgs,
			Message{Role: RoleAssistant, Content: strings.Repeat("thinking ", i), ToolCalls: []ToolCall{{ID: id, Name: "Read", Arguments: fmt.Sprintf(`{"path":"f%d.go"}`, i)}}},
			Message{Role: RoleTool, ToolCallID: id, Name: "Read", Content: strings.Repeat(fmt.Sprintf("line %d\t<&>\n", i), 50)})
	}
	tools := []ToolDef{{Name: "Read", Description: "Reads a file", Parameters: json.RawMessage(`{"type": "object", "properties": {"path": {"type": "string"}}}`)}, {Name: "Done"}}
	c := new(msgCache)
	numCtx := 0
	check := func(step string, model string) {
		t.Helper()
		req := Request{Messages: msgs, Tools: tools, MaxTokens: 512, ToolChoice: ToolChoiceAuto}
		wreq := openai.ChatCompletionRequest{Model: model, MaxTokens: 512, ToolChoice: ToolChoiceAuto}
		b, err := encodeBody(c, req, wreq, bodyOptions{numCtx: numCtx})
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		got := sent(t, b)
		want := freshBody(t, req, wreq, numCtx)
		if !bytes.Equal(got, want) {
			t.Fatalf("%s: cached body differs from a fresh encoding\n got: %s\nwant: %s", step, got, want)
		}
		if !json.Valid(got) {
			t.Fatalf("%s: body is not valid JSON", step)
		}
	}
	check("first turn", "gpt-4.1")
	cached := c.len()
	if cached != len(msgs) {
		t.Fatalf("cached %d messages after the first turn, want %d", cached, len(msgs))
	}
	gen := c.gen

	msgs = append(msgs, Message{Role: RoleAssistant, Content: "next"})
	check("appended", "gpt-4.1")
	hits := 0
	for _, e := range c.entries {
		if e.used == gen+1 {
			hits++
		}
	}
	if hits != len(msgs) {
		t.Fatalf("%d cached messages used by the second turn, want all %d", hits, len(msgs))
	}

	msgs[3].Content = "[masked: the output of Read, 600 bytes]"
	check("masked in place", "gpt-4.1")

	msgs[4].ToolCalls[0].Arguments = `{"path":"changed.go"}` // the caller's slice, in place
	check("call changed in place", "gpt-4.1")

	msgs[1].Parts[1].ImageData[len(img)-1] = 'X' // the caller's image bytes, in place
	check("image changed in place", "gpt-4.1")

	msgs[5].Content = strings.Clone(msgs[5].Content) // equal text, another string
	check("equal text in a new string", "gpt-4.1")

	msgs = append([]Message{msgs[0], {Role: RoleUser, Content: "Summary of the work so far: read six files."}}, msgs[len(msgs)-3:]...)
	check("compacted", "gpt-4.1")

	check("a model name like the marker", `x,"messages":null`)

	numCtx = 131072 // Ollama's options, after the messages
	check("with options.num_ctx", "gpt-4.1")
	numCtx = 0

	c.limit = 600 // smaller than the movement: entries go, bodies stay right
	for i := range 5 {
		msgs = append(msgs, Message{Role: RoleTool, ToolCallID: fmt.Sprint("late_", i), Content: strings.Repeat("x", 200)})
		check(fmt.Sprint("past the bound, turn ", i), "gpt-4.1")
	}
	for _, e := range c.entries {
		if c.bytes > c.limit && e.used != c.gen {
			t.Fatalf("cache holds %d bytes past its bound of %d, with entries the last turn did not use", c.bytes, c.limit)
		}
	}
}

// TestCachedBodyRefusesBadMessages: a message that cannot be encoded fails
// the request every time, cached or not.
func TestCachedBodyRefusesBadMessages(t *testing.T) {
	c := new(msgCache)
	wreq := openai.ChatCompletionRequest{Model: "m"}
	bad := Request{Messages: []Message{{Role: RoleSystem, Content: "s"}, {Role: "robot", Content: "x"}}}
	for range 2 {
		if _, err := encodeBody(c, bad, wreq, bodyOptions{}); err == nil || !strings.Contains(err.Error(), "message 1") {
			t.Fatalf("err = %v, want message 1's unknown role", err)
		}
	}
}

// TestCacheComparesEveryField: sameMessage and ownCopy name Message's and
// Part's fields one by one; a field added to either must be added there
// (and to keyOf when it is large), or a cached encoding could outlive a
// change of it.
func TestCacheComparesEveryField(t *testing.T) {
	if n := reflect.TypeOf(Message{}).NumField(); n != 7 {
		t.Errorf("Message has %d fields; sameMessage compares 7: update it, ownCopy and keyOf", n)
	}
	if n := reflect.TypeOf(Part{}).NumField(); n != 4 {
		t.Errorf("Part has %d fields; sameMessage compares 4: update it and ownCopy", n)
	}
	if n := reflect.TypeOf(ToolCall{}).NumField(); n != 3 {
		t.Errorf("ToolCall has %d fields: check that == still compares them all", n)
	}
}

// TestCacheForgetsEndedMovements: the messages of a movement no request
// uses any more leave the cache, while those of a movement still going
// stay.
func TestCacheForgetsEndedMovements(t *testing.T) {
	c := new(msgCache)
	wreq := openai.ChatCompletionRequest{Model: "m"}
	ended := Request{Messages: []Message{{Role: RoleSystem, Content: "ended movement"}, {Role: RoleUser, Content: strings.Repeat("e", 100)}}}
	going := Request{Messages: []Message{{Role: RoleSystem, Content: "going movement"}, {Role: RoleUser, Content: strings.Repeat("g", 100)}}}
	if _, err := encodeBody(c, ended, wreq, bodyOptions{}); err != nil {
		t.Fatal(err)
	}
	for range staleAfter + staleEvery {
		if _, err := encodeBody(c, going, wreq, bodyOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, e := range c.entries {
		if strings.HasPrefix(e.msg.Content, "ended") || strings.HasPrefix(e.msg.Content, "e") {
			t.Errorf("the ended movement's message %q is still cached", e.msg.Content[:5])
		}
	}
	if c.len() != 2 {
		t.Errorf("cache holds %d messages, want the going movement's 2", c.len())
	}
}
