// Package mcptest is an MCP server for Baton's tests, built on the same SDK
// as Baton's client (github.com/modelcontextprotocol/go-sdk), served over
// stdio by the test binary itself and over Streamable HTTP in process.
//
// A package whose tests start the stdio server routes its test binary to
// it from TestMain:
//
//	func TestMain(m *testing.M) { mcptest.Main(m) }
//
// (or, with a TestMain of its own, calls Serve when os.Args[1] is
// Subcommand), and a test names the server with Command:
//
//	exe, args := mcptest.Command(t, mcptest.Options{Tools: 100})
//
// StartHTTP serves the same tools over Streamable HTTP and records the
// headers of every request.
//
// The tools: echo (readOnlyHint true), write (no hints: a write-like tool
// that appends to mcp-writes.txt in its working directory, or over HTTP to
// the server's record), slow (readOnlyHint true; sleeps), crash (the stdio
// server exits mid-call), fail (an isError result), image (a PNG), huge
// (10 MB of text), env_names (the names of the variables the server was
// given), getenv (a variable's value: a server that says its secret) and elicit (asks the user through elicitation). Options add the
// bad inputs: garbage on stdout, a schema OpenAI would refuse, a handshake
// never answered, many tools.
package mcptest

import (
	"context"
	"encoding/base64"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Subcommand is the first argument that makes a test binary the stdio
// server (Main, Serve).
const Subcommand = "mcptest-server"

// WritesFile is the file the write tool appends to, in the stdio server's
// working directory.
const WritesFile = "mcp-writes.txt"

// HugeBytes is the size of the huge tool's text.
const HugeBytes = 10 << 20

// Options choose the server's bad inputs. The zero value is a well-behaved
// server.
type Options struct {
	// Garbage writes a line that is not JSON-RPC to stdout before anything
	// else (stdio only).
	Garbage bool
	// BadSchema adds the tool bad.schema/v1, whose name and input schema
	// OpenAI-compatible function calling would refuse as they stand.
	BadSchema bool
	// NoHandshake reads requests and answers none: the handshake never
	// finishes (stdio only).
	NoHandshake bool
	// Tools adds the tools many_1 … many_N (readOnlyHint true).
	Tools int
	// Protocol, when set, is the one protocol version the server speaks.
	Protocol string
	// RequireEnv, when set, makes the server refuse to start unless that
	// variable is set (stdio only).
	RequireEnv string
}

// args renders o as the stdio server's arguments.
func (o Options) args() []string {
	a := []string{Subcommand}
	if o.Garbage {
		a = append(a, "-garbage")
	}
	if o.BadSchema {
		a = append(a, "-bad-schema")
	}
	if o.NoHandshake {
		a = append(a, "-no-handshake")
	}
	if o.Tools > 0 {
		a = append(a, "-tools="+strconv.Itoa(o.Tools))
	}
	if o.Protocol != "" {
		a = append(a, "-protocol="+o.Protocol)
	}
	if o.RequireEnv != "" {
		a = append(a, "-require-env="+o.RequireEnv)
	}
	return a
}

// parse reads the arguments args renders (Subcommand excluded).
func parse(args []string) (Options, error) {
	var o Options
	fs := flag.NewFlagSet(Subcommand, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.BoolVar(&o.Garbage, "garbage", false, "")
	fs.BoolVar(&o.BadSchema, "bad-schema", false, "")
	fs.BoolVar(&o.NoHandshake, "no-handshake", false, "")
	fs.IntVar(&o.Tools, "tools", 0, "")
	fs.StringVar(&o.Protocol, "protocol", "", "")
	fs.StringVar(&o.RequireEnv, "require-env", "", "")
	err := fs.Parse(args)
	return o, err
}

// Command returns the program and arguments that start the stdio server
// with o: this test binary, whose TestMain must call Main (or Serve).
func Command(tb testing.TB, o Options) (string, []string) {
	tb.Helper()
	exe, err := os.Executable()
	if err != nil {
		tb.Fatal(err)
	}
	return exe, o.args()
}

// Main serves over stdio when the test binary is started with Subcommand;
// otherwise it runs the tests. It does not return.
func Main(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == Subcommand {
		os.Exit(Serve(os.Args[2:]))
	}
	os.Exit(m.Run())
}

// Serve runs the stdio server with the options args hold until stdin
// closes, and returns the process's exit code.
func Serve(args []string) int {
	o, err := parse(args)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mcptest:", err)
		return 2
	}
	if o.RequireEnv != "" && os.Getenv(o.RequireEnv) == "" {
		fmt.Fprintf(os.Stderr, "mcptest: %s is not set\n", o.RequireEnv)
		return 3
	}
	if o.Garbage {
		fmt.Println("Starting the server... this line is not JSON-RPC")
	}
	if o.NoHandshake {
		io.Copy(io.Discard, os.Stdin) //nolint:errcheck // until the client gives up
		return 0
	}
	srv := NewServer(o, &fileWrites{})
	if err := srv.Run(context.Background(), &mcp.StdioTransport{}); err != nil && !strings.Contains(err.Error(), "EOF") {
		fmt.Fprintln(os.Stderr, "mcptest:", err)
		return 1
	}
	return 0
}

// Writes records what the write tool was given.
type Writes interface {
	Write(text string) (string, error)
}

// fileWrites appends to WritesFile in the working directory.
type fileWrites struct{}

func (fileWrites) Write(text string) (string, error) {
	f, err := os.OpenFile(WritesFile, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return "", err
	}
	defer f.Close()
	if _, err := f.WriteString(text + "\n"); err != nil {
		return "", err
	}
	wd, _ := os.Getwd()
	return "wrote " + strconv.Itoa(len(text)+1) + " bytes to " + WritesFile + " in " + wd, nil
}

// memWrites keeps the texts in memory (the HTTP server).
type memWrites struct {
	mu    sync.Mutex
	texts []string // guarded by mu
}

func (m *memWrites) Write(text string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.texts = append(m.texts, text)
	return "wrote " + strconv.Itoa(len(text)+1) + " bytes", nil
}

type echoIn struct {
	Text string `json:"text" jsonschema:"the text to echo back"`
}

type writeIn struct {
	Text string `json:"text" jsonschema:"the text to append"`
}

type slowIn struct {
	Seconds float64 `json:"seconds" jsonschema:"how long to sleep"`
}

type getenvIn struct {
	Name string `json:"name" jsonschema:"the variable"`
}

type elicitIn struct {
	Question string `json:"question" jsonschema:"what to ask the user"`
}

// tinyPNG is a 1×1 PNG.
var tinyPNG, _ = base64.StdEncoding.DecodeString("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGP4z8DwHwAFAAH/iZk9HQAAAABJRU5ErkJggg==")

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

// NewServer returns the server with o's tools; the write tool records in w.
func NewServer(o Options, w Writes) *mcp.Server {
	opts := &mcp.ServerOptions{}
	if o.Protocol != "" {
		opts.SupportedProtocolVersions = []string{o.Protocol}
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "mcptest", Version: "1"}, opts)
	ro := &mcp.ToolAnnotations{ReadOnlyHint: true}
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Echo the text back.", Annotations: ro},
		func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
			return text("echo: " + in.Text), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "write", Description: "Append the text to the server's record (changes things)."},
		func(_ context.Context, _ *mcp.CallToolRequest, in writeIn) (*mcp.CallToolResult, any, error) {
			said, err := w.Write(in.Text)
			if err != nil {
				return nil, nil, err
			}
			return text(said), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "slow", Description: "Sleep for the seconds given.", Annotations: ro},
		func(ctx context.Context, _ *mcp.CallToolRequest, in slowIn) (*mcp.CallToolResult, any, error) {
			select {
			case <-time.After(time.Duration(in.Seconds * float64(time.Second))):
				return text("slept"), nil, nil
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			}
		})
	mcp.AddTool(s, &mcp.Tool{Name: "crash", Description: "Exit the server in the middle of the call.", Annotations: ro},
		func(context.Context, *mcp.CallToolRequest, any) (*mcp.CallToolResult, any, error) {
			os.Exit(7)
			return nil, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "fail", Description: "Fail with a tool error.", Annotations: ro},
		func(context.Context, *mcp.CallToolRequest, any) (*mcp.CallToolResult, any, error) {
			r := text("the tool failed on purpose")
			r.IsError = true
			return r, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "image", Description: "Return a tiny PNG.", Annotations: ro},
		func(context.Context, *mcp.CallToolRequest, any) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{
				&mcp.TextContent{Text: "a 1x1 picture"}, &mcp.ImageContent{MIMEType: "image/png", Data: tinyPNG},
			}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "huge", Description: "Return 10 MB of text.", Annotations: ro},
		func(context.Context, *mcp.CallToolRequest, any) (*mcp.CallToolResult, any, error) {
			return text(hugeText()), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "env_names", Description: "List the names of the server's environment variables.", Annotations: ro},
		func(context.Context, *mcp.CallToolRequest, any) (*mcp.CallToolResult, any, error) {
			var names []string
			for _, kv := range os.Environ() {
				k, _, _ := strings.Cut(kv, "=")
				names = append(names, k)
			}
			slices.Sort(names)
			return text(strings.Join(names, "\n")), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "getenv", Description: "Say the value of one of the server's environment variables (a server that gives its secret away).", Annotations: ro},
		func(_ context.Context, _ *mcp.CallToolRequest, in getenvIn) (*mcp.CallToolResult, any, error) {
			return text(in.Name + "=" + os.Getenv(in.Name)), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "elicit", Description: "Ask the user a question and return the answer.", Annotations: ro},
		func(ctx context.Context, req *mcp.CallToolRequest, in elicitIn) (*mcp.CallToolResult, any, error) {
			// The multi-round-trip form (SEP-2322): the SDK turns it into
			// an elicitation request for clients of older protocols.
			answer, ok := req.Params.InputResponses["answer"].(*mcp.ElicitResult)
			if !ok {
				return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"answer": &mcp.ElicitParams{
					Message: in.Question,
					RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{
						"answer": map[string]any{"type": "string"},
					}, "required": []string{"answer"}},
				}}}, nil, nil
			}
			if answer.Action != "accept" {
				return text("the user chose " + answer.Action), nil, nil
			}
			return text(fmt.Sprintf("the user answered: %v", answer.Content["answer"])), nil, nil
		})
	if o.BadSchema {
		s.AddTool(&mcp.Tool{Name: "bad.schema/v1", Description: "A tool whose schema needs adapting.", Annotations: ro,
			InputSchema: map[string]any{
				"$schema": "https://json-schema.org/draft/2020-12/schema",
				"type":    "object",
				"properties": map[string]any{
					"tags": map[string]any{"type": "array"},
					"any":  true,
				},
				"anyOf": []any{map[string]any{"required": []string{"tags"}}},
			}},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return text("bad schema, good call"), nil
			})
	}
	for i := 1; i <= o.Tools; i++ {
		name := "many_" + strconv.Itoa(i)
		mcp.AddTool(s, &mcp.Tool{Name: name, Description: fmt.Sprintf("Tool number %d of many; answers with its number.", i), Annotations: ro},
			func(context.Context, *mcp.CallToolRequest, any) (*mcp.CallToolResult, any, error) {
				return text(name + " answered"), nil, nil
			})
	}
	return s
}

// hugeText is HugeBytes of numbered lines, made once.
var hugeText = sync.OnceValue(func() string {
	b := make([]byte, 0, HugeBytes+64)
	for i := 0; len(b) < HugeBytes; i++ {
		b = append(b, "line "...)
		n := strconv.Itoa(i)
		for range 8 - len(n) {
			b = append(b, '0')
		}
		b = append(b, n...)
		b = append(b, " of the huge result\n"...)
	}
	return string(b[:HugeBytes])
})

// HTTPServer is the server over Streamable HTTP, stopped by the test's
// cleanup.
type HTTPServer struct {
	// URL is the MCP endpoint.
	URL    string
	srv    *httptest.Server
	writes *memWrites

	mu      sync.Mutex
	headers []http.Header // guarded by mu
	need    http.Header   // headers every request must carry; 401 otherwise
}

// StartHTTP serves o's tools over Streamable HTTP on loopback. need, when
// set, are headers every request must carry (401 otherwise).
func StartHTTP(tb testing.TB, o Options, need http.Header) *HTTPServer {
	tb.Helper()
	h := &HTTPServer{writes: &memWrites{}, need: need}
	srv := NewServer(o, h.writes)
	// A server of the stateless protocol (2026-07-28 on) serves it only
	// statelessly.
	mh := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: o.Protocol >= "2026-07-28"})
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		h.headers = append(h.headers, r.Header.Clone())
		h.mu.Unlock()
		for k, vs := range h.need {
			if !slices.Equal(r.Header.Values(k), vs) {
				http.Error(w, "missing or wrong "+k, http.StatusUnauthorized)
				return
			}
		}
		mh.ServeHTTP(w, r)
	}))
	h.URL = h.srv.URL + "/mcp"
	tb.Cleanup(h.srv.Close)
	return h
}

// Headers returns the headers of every request so far, in order.
func (h *HTTPServer) Headers() []http.Header {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.headers)
}

// Writes returns what the write tool was given, in order.
func (h *HTTPServer) Writes() []string {
	h.writes.mu.Lock()
	defer h.writes.mu.Unlock()
	return slices.Clone(h.writes.texts)
}
