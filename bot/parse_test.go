package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/baton-bot/baton/core/docparse"
	"github.com/baton-bot/baton/core/egress"
	"github.com/baton-bot/baton/core/llmtest"

	"github.com/baton-bot/baton/core/mcp/mcptest"
	"github.com/baton-bot/baton/core/sandbox/sandboxtest"
)

// TestMain makes this test binary the parser child when it is run with
// docparse.Subcommand, and the sandbox's egress bridge with
// egress.BridgeSubcommand, through Main as the baton binary is: `baton
// run` started in-process by a test re-executes os.Executable(), this
// binary, to parse a document or to relay a command's connections, so
// these subcommands are tested without building baton.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == mcptest.Subcommand {
		os.Exit(mcptest.Serve(os.Args[2:])) // the MCP test server (baton mcp list)
	}
	if len(os.Args) > 1 && (os.Args[1] == docparse.Subcommand || os.Args[1] == egress.BridgeSubcommand) {
		bm := NewMain()
		os.Exit(bm.Report(bm.Run(context.Background(), os.Args[1:])))
	}
	os.Exit(m.Run())
}

// textPDF builds a one-page PDF showing text, with its cross-reference
// table, in plain ASCII.
func textPDF(text string) string {
	content := fmt.Sprintf("BT /F1 12 Tf 72 720 Td (%s) Tj ET", text)
	objs := []string{
		"<< /Type /Catalog /Pages 2 0 R >>",
		"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
		"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 4 0 R >> >> /Contents 5 0 R >>",
		"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
		fmt.Sprintf("<< /Length %d >>\nstream\n%s\nendstream", len(content), content),
	}
	var b bytes.Buffer
	b.WriteString("%PDF-1.4\n")
	offsets := make([]int, len(objs))
	for i, o := range objs {
		offsets[i] = b.Len()
		fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n", i+1, o)
	}
	xref := b.Len()
	fmt.Fprintf(&b, "xref\n0 %d\n0000000000 65535 f \n", len(objs)+1)
	for _, o := range offsets {
		fmt.Fprintf(&b, "%010d 00000 n \n", o)
	}
	fmt.Fprintf(&b, "trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n", len(objs)+1, xref)
	return b.String()
}

// TestRunReadsDocumentsInTheParserChild: `baton run` wires ReadDocument
// to a parser child that is the baton binary run with the hidden
// subcommand, which help does not list.
func TestRunReadsDocumentsInTheParserChild(t *testing.T) {
	t.Run("unsandboxed", func(t *testing.T) { readsDocument(t, newNewcomer(t)) })
	// In the sandbox the binary is handed in as an open file: the test
	// binary lives in a directory the sandbox's user cannot enter.
	t.Run("sandboxed", func(t *testing.T) {
		if _, err := exec.LookPath("bwrap"); err != nil && os.Getenv("BATON_REQUIRE_BWRAP") == "" {
			t.Skip("bubblewrap is not installed")
		}
		n := newNewcomer(t)
		n.conf = writeConfig(t, "log:\n  level: warn\ntools:\n  bash:\n    sandbox: bwrap\n")
		n.env["BATON_DATA_DIR"] = sandboxtest.Dir(t)
		readsDocument(t, n)
	})
}

func readsDocument(t *testing.T, n *newcomer) {
	write, err := json.Marshal(map[string]string{"path": "input/report.pdf", "content": textPDF("Revenue grew by 12 percent")})
	if err != nil {
		t.Fatal(err)
	}
	n.srv.Script(
		llmtest.Call("Write", string(write)),
		llmtest.Call("ReadDocument", `{"path":"input/report.pdf"}`),
		llmtest.Call("transition", `{"next_step":"COMPLETE","summary":"Revenue grew by 12 percent."}`),
	)
	code, stdout, stderr := n.run("summarise input/report.pdf")
	if code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	reqs := n.srv.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests, want 3", len(reqs))
	}
	msgs := reqs[2].Messages
	if got := msgs[len(msgs)-1]; got.Role != "tool" || !strings.Contains(got.Text(), "## Page 1\n\nRevenue grew by 12 percent") {
		t.Errorf("ReadDocument's result = %s %q, want the page's text", got.Role, got.Text())
	}

	var help bytes.Buffer
	m := NewMain()
	m.Stdout, m.Stderr = &help, &help
	if err := m.Run(context.Background(), []string{"help"}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(help.String(), docparse.Subcommand) {
		t.Errorf("help lists the hidden %s:\n%s", docparse.Subcommand, help.String())
	}
}
