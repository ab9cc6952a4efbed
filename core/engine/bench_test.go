package engine

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/baton-bot/baton/core/llm"
	"github.com/baton-bot/baton/core/tokens"
)

// BenchmarkTurnOverhead measures the engine's work for one agent turn
// (SPEC §15) at contexts from 10k to 1M tokens (the 1M one in a window of
// 1,047,576 tokens, as long-context models offer): from a response
// received to the next request encoded — recording the assistant message
// and its usage, adding a tool result, counting only the new content with
// the tokenizer, checking the context ladder, and translating and
// JSON-encoding the request (the messages sent before come from the
// client's cache; the new ones are encoded) into the body handed to the
// transport: a reader over the cached pieces, never joined. The tool
// itself and the network (writing the body's bytes out once) are
// excluded. request-bytes is the size of the body, encode-ns/op the part
// of the turn spent building it, cpu-ns/op the CPU time of a turn (see
// cpuTime), context-tokens the movement's size before the turn. The
// targets are set at 100k and 1M; the sizes between show how the cost
// grows (go run ./bot/perfplot -bench plots them).
//
//	go test ./core/engine/ -run '^$' -bench TurnOverhead -benchmem
//	go test ./core/engine/ -run '^$' -bench 'TurnOverhead/tokens=(100k|1M)$' -benchmem
func BenchmarkTurnOverhead(b *testing.B) {
	for _, c := range []struct {
		name           string
		tokens, window int
	}{
		{"tokens=10k", 10_000, 1_000_000},
		{"tokens=50k", 50_000, 1_000_000},
		{"tokens=100k", 100_000, 1_000_000},
		{"tokens=300k", 300_000, 1_000_000},
		{"tokens=1M", 1_000_000, 1_047_576},
	} {
		b.Run(c.name, func(b *testing.B) { benchTurn(b, c.tokens, c.window) })
	}
}

func benchTurn(b *testing.B, fill, window int) {
	counter := tokens.Default()
	client, err := llm.New(llm.Config{BaseURL: "http://127.0.0.1:1/v1", Model: "gpt-4.1-mini"})
	if err != nil {
		b.Fatal(err)
	}
	defs := []llm.ToolDef{transitionDef(nil, []string{"COMPLETE", "ASK", "ABORT"})}
	m := newMeter(window, counter, newDefCounts(counter).count(defs))
	var msgs []llm.Message
	add := func(msg llm.Message) {
		msgs = append(msgs, msg)
		m.appended(msg)
	}
	add(llm.Message{Role: llm.RoleSystem, Content: strings.Repeat("You are a careful engineer. ", 40)})
	add(llm.Message{Role: llm.RoleUser, Content: strings.Repeat("Summarise the report in input/. ", 40)})
	// Tool results are 4 KB chunks of Baton's own sources: real code, each
	// turn's result different from the last.
	corpus := sourceChunks(b, 4096)
	next := 0
	chunk := func() string {
		c := corpus[next%len(corpus)]
		next++
		return c
	}
	// Fill the movement with tool calls and results up to the context size.
	for i := 0; m.used() < fill; i++ {
		add(llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: fmt.Sprint("c", i), Name: "Read", Arguments: `{"path":"input/file.go","offset":1}`}}})
		add(llm.Message{Role: llm.RoleTool, ToolCallID: fmt.Sprint("c", i), Name: "Read", Content: strings.Clone(chunk())})
	}
	b.Logf("context: %d tokens in %d messages; %d source chunks", m.used(), len(msgs), len(corpus))
	base, contextTokens := len(msgs), m.used()
	req := func() llm.Request {
		return llm.Request{Messages: msgs, Tools: defs, MaxTokens: 4096, ToolChoice: llm.ToolChoiceAuto}
	}
	// The turns before this one sent the movement already.
	if _, err := client.Encode(req()); err != nil {
		b.Fatal(err)
	}
	levels := Levels{Warn: 0.70, Prompt: 0.85, Force: 0.95, Exhausted: 0.99}
	var size int
	var encoding time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime(b)
	for i := range b.N {
		// Each turn starts from the same movement and appends what a turn
		// brings: the model's answer and a tool result, both new strings.
		msgs = msgs[:base]
		id := fmt.Sprint("next", i)
		add(llm.Message{Role: llm.RoleAssistant, Content: "Reading the next part.", ToolCalls: []llm.ToolCall{{ID: id, Name: "Read", Arguments: `{"path":"input/file.go","offset":61}`}}})
		m.responded(llm.Usage{PromptTokens: fill, CompletionTokens: 20, Reported: true})
		add(llm.Message{Role: llm.RoleTool, ToolCallID: id, Name: "Read", Content: strings.Clone(chunk())})
		_ = m.check(levels, levelExhausted)
		start := time.Now()
		body, err := client.Encode(req())
		if err != nil {
			b.Fatal(err)
		}
		sink = body.Reader() // what the transport is handed
		encoding += time.Since(start)
		size = body.Len()
		m.counts, m.total = m.counts[:base], sumInts(m.counts[:base])
	}
	b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(size), "request-bytes")
	b.ReportMetric(float64(contextTokens), "context-tokens")
	b.ReportMetric(float64(encoding.Nanoseconds())/float64(b.N), "encode-ns/op")
}

// cpuTime returns the CPU time the process has used (user and system, the
// garbage collector's included). Beside ns/op, which counts the waits for
// a core on a shared machine, cpu-ns/op is the work of a turn.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// sink keeps the benchmark's body reader alive.
var sink io.Reader

// sourceChunks cuts the Go sources of the module into chunks of about n
// bytes on line boundaries.
func sourceChunks(b *testing.B, n int) []string {
	files, _ := filepath.Glob(filepath.Join("..", "..", "*", "*", "*.go"))
	more, _ := filepath.Glob(filepath.Join("..", "..", "*", "*.go"))
	var chunks []string
	var cur strings.Builder
	for _, f := range append(files, more...) {
		src, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		for line := range strings.Lines(string(src)) {
			cur.WriteString(line)
			if cur.Len() >= n {
				chunks = append(chunks, cur.String())
				cur.Reset()
			}
		}
	}
	if len(chunks) < 100 {
		b.Fatalf("only %d chunks of source", len(chunks))
	}
	return chunks
}

func sumInts(xs []int) int {
	n := 0
	for _, x := range xs {
		n += x
	}
	return n
}
