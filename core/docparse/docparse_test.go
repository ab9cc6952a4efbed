package docparse_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/baton-bot/baton/core/docparse"
	"github.com/baton-bot/baton/core/docparse/docparsetest"
	"github.com/google/go-cmp/cmp"
)

func TestMain(m *testing.M) { docparsetest.Main(m) }

func readFile(tb testing.TB, name string) []byte {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func TestParse(t *testing.T) {
	r := docparsetest.Runner(t)
	tests := []struct {
		file string
		kind docparse.Kind
		want []string
	}{
		{"memo.docx", docparse.Docx, []string{"Quarterly memo\n", "Budget \tapproved\n", "cell one \tcell two"}},
		{"sales.xlsx", docparse.Xlsx, []string{"## Sheet: Sheet1\nRegion\tSales\nKanto\t1234\n", "## Sheet: Notes\nchecked"}},
		{"invoice.pdf", docparse.PDF, []string{"## Page 1\n", "Invoice total due", "## Page 2\n", "Page two"}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			res, err := r.Parse(context.Background(), tt.kind, bytes.NewReader(readFile(t, tt.file)))
			if err != nil {
				t.Fatal(err)
			}
			last := -1
			for _, w := range tt.want {
				i := strings.Index(res.Text, w)
				if i <= last {
					t.Fatalf("%q missing or out of order in:\n%s", w, res.Text)
				}
				last = i
			}
		})
	}
}

func TestParseRefusesInvalidInput(t *testing.T) {
	r := docparsetest.Runner(t)
	for _, tt := range []struct {
		kind docparse.Kind
		in   string
		want string
	}{
		{docparse.Docx, "not a zip", "not a valid .docx"},
		{docparse.Pptx, "not a zip", "not a valid .pptx"},
		{docparse.Xlsx, "not a zip", "not a valid .xlsx"},
		{docparse.PDF, "%PDF-1.4 broken", "not a valid PDF"},
		{docparse.Image, "GIF89a", "not a valid PNG, JPEG, GIF or WebP image"},
		{"odt", "x", `unknown kind "odt"`},
	} {
		_, err := r.Parse(context.Background(), tt.kind, strings.NewReader(tt.in))
		var inv *docparse.InvalidError
		if !errors.As(err, &inv) || !strings.Contains(inv.Reason, tt.want) {
			t.Errorf("%s %q: err = %v, want an InvalidError with %q", tt.kind, tt.in, err, tt.want)
		}
	}
}

// TestCyclicPDFsStop: two PDFs under 1 KB send the PDF reader into an
// endless loop (a /Kids that holds its own page tree node; a page whose
// /Parent chain is a cycle and names no /Resources). The child is stopped
// at the wall clock, and at its CPU limit when the wall clock is longer.
func TestCyclicPDFsStop(t *testing.T) {
	for _, name := range []string{"cyclic-kids.pdf", "cyclic-parent.pdf"} {
		data := readFile(t, name)
		if len(data) > 1024 {
			t.Fatalf("%s is %d bytes, want at most 1 KB", name, len(data))
		}
		t.Run(name+"/wall clock", func(t *testing.T) {
			r := docparsetest.Runner(t)
			r.Timeout = time.Second
			_, err := r.Parse(context.Background(), docparse.PDF, bytes.NewReader(data))
			var te *docparse.TimeoutError
			if !errors.As(err, &te) || te.CPU || te.Limit != time.Second {
				t.Fatalf("err = %v, want a wall-clock TimeoutError of 1s", err)
			}
		})
		t.Run(name+"/CPU", func(t *testing.T) {
			r := docparsetest.Runner(t)
			r.Timeout, r.CPU = time.Minute, time.Second
			// The loop allocates as it goes: room enough that the CPU
			// limit comes first even where the race detector and a busy
			// machine's slower collector fill the default 1 GiB sooner.
			r.MemoryBytes = 4 << 30
			_, err := r.Parse(context.Background(), docparse.PDF, bytes.NewReader(data))
			var te *docparse.TimeoutError
			if !errors.As(err, &te) || !te.CPU {
				t.Fatalf("err = %v, want a CPU TimeoutError", err)
			}
		})
	}
}

// TestCancelKillsTheGroup: cancelling the context mid-parse returns within
// 2 s and leaves no process of the child's group, a wrapper's child
// included.
func TestCancelKillsTheGroup(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var cmd *exec.Cmd
	r := &docparse.Runner{Timeout: time.Minute, Command: func(ctx context.Context) (*exec.Cmd, error) {
		// A wrapper that forks the parser rather than exec it, as a
		// sandbox does.
		cmd = exec.Command("/bin/sh", "-c", `"$0" "$1"; exit $?`, exe, docparse.Subcommand)
		return cmd, nil
	}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The input is a cyclic PDF: once the child has been given all of it,
	// the parse is under way.
	sent := make(chan struct{})
	in := &signalReader{r: bytes.NewReader(readFile(t, "cyclic-kids.pdf")), eof: func() { close(sent) }}
	done := make(chan error, 1)
	go func() {
		_, err := r.Parse(ctx, docparse.PDF, in)
		done <- err
	}()
	<-sent
	pgid := cmd.Process.Pid
	awaitBusyParser(t, exe)
	cancel()
	cancelled := time.Now()
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Parse did not return after the context was cancelled")
	}
	if d := time.Since(cancelled); d > 2*time.Second {
		t.Errorf("Parse returned %v after the cancellation, want within 2 s", d)
	}
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
	// Parse's Wait saw the output pipes close, so every process of the
	// group has exited; what may remain a moment is a zombie that has yet to
	// be reaped.
	if live := liveMembers(t, pgid); len(live) > 0 {
		t.Errorf("processes %v of the child's process group %d are still running", live, pgid)
	}
}

// liveMembers lists the processes of group pgid that have not exited
// (zombies excluded), from /proc.
func liveMembers(tb testing.TB, pgid int) []int {
	tb.Helper()
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		tb.Fatal(err)
	}
	var live []int
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // exited meanwhile
		}
		// pid (comm) state ppid pgrp …; comm may hold spaces and parens.
		_, rest, ok := strings.Cut(string(b), ") ")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) < 3 || f[0] == "Z" || f[0] == "X" {
			continue
		}
		if g, _ := strconv.Atoi(f[2]); g == pgid {
			pid, _ := strconv.Atoi(strings.Fields(string(b))[0])
			live = append(live, pid)
		}
	}
	return live
}

// signalReader calls eof once r is exhausted.
type signalReader struct {
	r   *bytes.Reader
	eof func()
}

func (s *signalReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if s.r.Len() == 0 && s.eof != nil {
		s.eof()
		s.eof = nil
	}
	return n, err
}

// pngHeader returns a PNG that declares w×h pixels of 16-bit RGBA and
// holds a few bytes of pixel data: a decompression bomb's header.
func pngHeader(w, h uint32) []byte {
	var b bytes.Buffer
	b.WriteString("\x89PNG\r\n\x1a\n")
	chunk := func(typ string, data []byte) {
		binary.Write(&b, binary.BigEndian, uint32(len(data)))
		crc := crc32.NewIEEE()
		crc.Write([]byte(typ))
		crc.Write(data)
		b.WriteString(typ)
		b.Write(data)
		binary.Write(&b, binary.BigEndian, crc.Sum32())
	}
	ihdr := binary.BigEndian.AppendUint32(nil, w)
	ihdr = binary.BigEndian.AppendUint32(ihdr, h)
	ihdr = append(ihdr, 16, 6, 0, 0, 0) // 16-bit RGBA, deflate, no interlace
	chunk("IHDR", ihdr)
	chunk("IDAT", []byte{0x78, 0x9c, 0x63, 0, 0, 0, 1, 0, 1})
	chunk("IEND", nil)
	return b.Bytes()
}

func TestImage(t *testing.T) {
	r := docparsetest.Runner(t)
	r.MemoryBytes = 64 << 20
	t.Run("bomb", func(t *testing.T) {
		_, err := r.Parse(context.Background(), docparse.Image, bytes.NewReader(pngHeader(100000, 100000)))
		var inv *docparse.InvalidError
		if !errors.As(err, &inv) || !strings.Contains(inv.Reason, "100000×100000 pixels, over the limit of 40 megapixels") {
			t.Fatalf("err = %v, want the pixel limit", err)
		}
	})
	t.Run("memory", func(t *testing.T) {
		// 36 megapixels, under the pixel limit: 288 MB to decode, over
		// the child's 64 MiB.
		_, err := r.Parse(context.Background(), docparse.Image, bytes.NewReader(pngHeader(6000, 6000)))
		var me *docparse.MemoryError
		if !errors.As(err, &me) || me.LimitBytes != 64<<20 {
			t.Fatalf("err = %v, want a MemoryError of 64 MiB", err)
		}
	})
	t.Run("corrupt", func(t *testing.T) {
		_, err := r.Parse(context.Background(), docparse.Image, bytes.NewReader(pngHeader(40, 30)))
		var inv *docparse.InvalidError
		if !errors.As(err, &inv) || !strings.Contains(inv.Reason, "the png image is corrupt") {
			t.Fatalf("err = %v, want a corrupt image", err)
		}
	})
}

// TestPDFBomb: a 7 KB PDF whose content stream, compressed twice,
// inflates to 4 GiB inside one string. The child stops at its memory limit.
func TestPDFBomb(t *testing.T) {
	r := docparsetest.Runner(t)
	r.MemoryBytes = 128 << 20
	_, err := r.Parse(context.Background(), docparse.PDF, bytes.NewReader(readFile(t, "bomb.pdf")))
	var me *docparse.MemoryError
	if !errors.As(err, &me) {
		t.Fatalf("err = %v, want a MemoryError", err)
	}
}

// TestChildOutputAndEnvironment: the Runner caps what a child writes, and a
// command without an environment gets an empty one, not Baton's.
func TestChildOutputAndEnvironment(t *testing.T) {
	sh := func(script string) func(context.Context) (*exec.Cmd, error) {
		return func(context.Context) (*exec.Cmd, error) {
			return exec.Command("/bin/sh", "-c", "cat >/dev/null; "+script), nil
		}
	}
	r := &docparse.Runner{Command: sh("head -c 20000000 /dev/zero")}
	_, err := r.Parse(context.Background(), docparse.PDF, strings.NewReader("x"))
	var oe *docparse.OutputError
	if !errors.As(err, &oe) {
		t.Errorf("20 MB of output: err = %v, want an OutputError", err)
	}
	t.Setenv("BATON_TEST_SECRET", "hunter2")
	r = &docparse.Runner{Command: sh(`printf '{"format":"%s"}\n' "${BATON_TEST_SECRET-unset}"`)}
	res, err := r.Parse(context.Background(), docparse.Image, strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(docparse.Result{Format: "unset"}, res); diff != "" {
		t.Errorf("the child saw the parent's environment (-want +got):\n%s", diff)
	}
	r = &docparse.Runner{Command: sh("echo garbage; exit 0")}
	if _, err := r.Parse(context.Background(), docparse.PDF, strings.NewReader("x")); err == nil || !strings.Contains(err.Error(), "no valid reply") {
		t.Errorf("garbage reply: err = %v", err)
	}
	r = &docparse.Runner{Command: sh("exit 3")}
	if _, err := r.Parse(context.Background(), docparse.PDF, strings.NewReader("x")); err == nil || !strings.Contains(err.Error(), "exit status 3") {
		t.Errorf("failed child: err = %v", err)
	}
}

// TestInBubblewrap: the child wrapped in bubblewrap as a sandbox wraps it
// (its own session, no network, nobody's uid, no capabilities) parses, and
// a cancellation still stops it: the Runner kills bwrap's group, and
// --die-with-parent takes the parser with it. Skipped without a working
// bwrap unless BATON_REQUIRE_BWRAP=1.
func TestInBubblewrap(t *testing.T) {
	bw, err := exec.LookPath("bwrap")
	if err == nil {
		err = exec.Command(bw, "--ro-bind", "/", "/", "--unshare-all", "--", "/bin/true").Run()
	}
	if err != nil {
		if os.Getenv("BATON_REQUIRE_BWRAP") == "1" {
			t.Fatalf("bubblewrap does not work here (BATON_REQUIRE_BWRAP=1): %v", err)
		}
		t.Skipf("bubblewrap does not work here (set BATON_REQUIRE_BWRAP=1 to fail instead): %v", err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	r := &docparse.Runner{Command: func(context.Context) (*exec.Cmd, error) {
		return exec.Command(bw, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-all",
			"--uid", "65534", "--gid", "65534", "--cap-drop", "ALL", "--die-with-parent", "--new-session",
			"--", exe, docparse.Subcommand), nil
	}}
	res, err := r.Parse(context.Background(), docparse.PDF, bytes.NewReader(readFile(t, "invoice.pdf")))
	if err != nil || !strings.Contains(res.Text, "Invoice total due") {
		t.Fatalf("Parse = %q, %v", res.Text, err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sent := make(chan struct{})
	in := &signalReader{r: bytes.NewReader(readFile(t, "cyclic-kids.pdf")), eof: func() { close(sent) }}
	done := make(chan error, 1)
	go func() {
		_, err := r.Parse(ctx, docparse.PDF, in)
		done <- err
	}()
	<-sent
	awaitBusyParser(t, exe)
	cancel()
	cancelled := time.Now()
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Parse did not return after the context was cancelled")
	}
	if d := time.Since(cancelled); d > 2*time.Second || !errors.Is(err, context.Canceled) {
		t.Errorf("Parse returned %v after the cancellation with %v, want context.Canceled within 2 s", d, err)
	}
	// The parser is in bwrap's session, not its group: it dies by
	// --die-with-parent, which the kernel delivers as bwrap exits.
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		live := parsers(t, exe)
		if len(live) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("parser processes %v still run 2 s after the cancellation", live)
		}
	}
}

// parsers lists the live (not zombie) processes running exe as the child.
func parsers(tb testing.TB, exe string) []int {
	tb.Helper()
	cmdlines, err := filepath.Glob("/proc/[0-9]*/cmdline")
	if err != nil {
		tb.Fatal(err)
	}
	var live []int
	for _, p := range cmdlines {
		b, err := os.ReadFile(p)
		if err != nil || string(b) != exe+"\x00"+docparse.Subcommand+"\x00" {
			continue
		}
		st, err := os.ReadFile(filepath.Join(filepath.Dir(p), "stat"))
		if _, rest, _ := strings.Cut(string(st), ") "); err != nil || strings.HasPrefix(rest, "Z") {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		live = append(live, pid)
	}
	return live
}

// awaitBusyParser waits until a parser child of exe runs and has used CPU
// time: the parse is under way.
func awaitBusyParser(tb testing.TB, exe string) {
	tb.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		for _, pid := range parsers(tb, exe) {
			if cpuTicks(pid) > 2 {
				return
			}
		}
		if time.Now().After(deadline) {
			tb.Fatal("no parser child started parsing")
		}
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
	f := strings.Fields(rest) // from field 3 (state); utime is field 14
	if len(f) < 12 {
		return 0
	}
	n, _ := strconv.Atoi(f[11])
	return n
}
