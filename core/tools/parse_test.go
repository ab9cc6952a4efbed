package tools

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"hash/crc32"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/baton-bot/baton/core/docparse"
	"github.com/baton-bot/baton/core/docparse/docparsetest"
)

func TestMain(m *testing.M) { docparsetest.Main(m) }

// callWithin runs the tool with ctx and fails the test if it has not
// returned within limit: a tool that hangs fails the test rather than
// hanging the test binary.
func callWithin(t *testing.T, ctx context.Context, limit time.Duration, tool Tool, env *Env, args obj) Result {
	t.Helper()
	raw, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan Result, 1)
	go func() { done <- Safe(ctx, tool, env, raw) }()
	select {
	case res := <-done:
		return res
	case <-time.After(limit):
		t.Fatalf("%s did not return within %v", tool.Name(), limit)
		return Result{}
	}
}

func copyFixture(t *testing.T, env *Env, name, rel string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "docparse", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	put(t, env, rel, b)
}

// TestReadDocumentMalformedPDFs: two PDFs under 1 KB that send the PDF
// reader into an endless loop (see core/docparse/testdata) end as a plain
// tool error when the parser's limit passes; parsed in process, the call
// never returned.
func TestReadDocumentMalformedPDFs(t *testing.T) {
	env := newEnv(t)
	p := docparsetest.Runner(t)
	p.Timeout = 2 * time.Second
	for _, name := range []string{"cyclic-kids.pdf", "cyclic-parent.pdf"} {
		t.Run(name, func(t *testing.T) {
			copyFixture(t, env, name, "input/"+name)
			res := callWithin(t, context.Background(), time.Minute, ReadDocument{Parser: p}, env, obj{"path": "input/" + name})
			msg := failed(t, res)
			want := "ReadDocument: parsing input/" + name + " took longer than 2 s and was stopped; the file may be malformed"
			if !strings.HasPrefix(msg, want) {
				t.Errorf("result %q, want it to start with %q", msg, want)
			}
		})
	}
}

// TestReadDocumentAbort: cancelling the call's context (`!abort`) while a
// malformed PDF is being parsed returns within 2 s, and the parser's
// process is gone.
func TestReadDocumentAbort(t *testing.T) {
	env := newEnv(t)
	copyFixture(t, env, "cyclic-parent.pdf", "input/report.pdf")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	pidFile := filepath.Join(t.TempDir(), "pid")
	p := &docparse.Runner{Command: func(context.Context) (*exec.Cmd, error) { // the default limits: 30 s
		return exec.Command("/bin/sh", "-c", `echo $$ >"$0"; exec "$1" "$2"`, pidFile, exe, docparse.Subcommand), nil
	}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan Result, 1)
	go func() {
		done <- Safe(ctx, ReadDocument{Parser: p}, env, json.RawMessage(`{"path":"input/report.pdf"}`))
	}()
	// Wait for the child to be busy parsing: it has used CPU time.
	pid := 0
	for deadline := time.Now().Add(20 * time.Second); pid == 0 || cpuTicks(pid) < 5; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the parser child did not start parsing")
		}
		if b, err := os.ReadFile(pidFile); err == nil && strings.HasSuffix(string(b), "\n") {
			pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		}
	}
	cancel()
	cancelled := time.Now()
	var res Result
	select {
	case res = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("ReadDocument did not return after the abort")
	}
	if d := time.Since(cancelled); d > 2*time.Second {
		t.Errorf("ReadDocument returned %v after the abort, want within 2 s", d)
	}
	if msg := failed(t, res); !strings.Contains(msg, "cancelled") {
		t.Errorf("result %q does not say it was cancelled", msg)
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("the parser child %d is still there: kill -0 = %v", pid, err)
	}
}

// cpuTicks is the user CPU time of process pid in clock ticks, 0 when it
// cannot be read.
func cpuTicks(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	_, rest, _ := strings.Cut(string(b), ") ")
	f := strings.Fields(rest) // state is field 3 of stat, utime field 14
	if len(f) < 12 {
		return 0
	}
	n, _ := strconv.Atoi(f[11])
	return n
}

// TestBombs: a PDF whose stream inflates to 4 GiB and a PNG that declares
// 100000×100000 pixels end as tool errors, within the child's memory limit
// or before any pixel is decoded.
func TestBombs(t *testing.T) {
	env := newEnv(t)
	p := docparsetest.Runner(t)
	p.MemoryBytes = 128 << 20
	copyFixture(t, env, "bomb.pdf", "input/bomb.pdf")
	msg := failed(t, callWithin(t, context.Background(), time.Minute, ReadDocument{Parser: p}, env, obj{"path": "input/bomb.pdf"}))
	if want := "ReadDocument: parsing input/bomb.pdf needed more than 128 MB of memory and was stopped"; !strings.HasPrefix(msg, want) {
		t.Errorf("PDF bomb: %q, want it to start with %q", msg, want)
	}

	var png bytes.Buffer
	png.WriteString("\x89PNG\r\n\x1a\n")
	ihdr := []byte("IHDR\x00\x01\x86\xa0\x00\x01\x86\xa0\x10\x06\x00\x00\x00") // 100000×100000, 16-bit RGBA
	binary.Write(&png, binary.BigEndian, uint32(len(ihdr)-4))
	png.Write(ihdr)
	binary.Write(&png, binary.BigEndian, crc32.ChecksumIEEE(ihdr))
	put(t, env, "input/bomb.png", png.Bytes())
	msg = failed(t, callWithin(t, context.Background(), time.Minute, ReadImage{Parser: p}, env, obj{"path": "input/bomb.png"}))
	if want := "ReadImage: input/bomb.png: the png image declares 100000×100000 pixels, over the limit of 40 megapixels"; msg != want {
		t.Errorf("PNG bomb: %q, want %q", msg, want)
	}
}
