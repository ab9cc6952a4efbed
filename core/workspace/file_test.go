package workspace

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-bot/baton/core/workspace/workspacetest"
)

// outsideTree opens a workspace next to an empty directory "outside" and
// returns both; entries reports what outside holds when the test ends.
func outsideTree(tb testing.TB) (*Workspace, string) {
	tb.Helper()
	base := tb.TempDir()
	outside := filepath.Join(base, "outside")
	must(tb, os.Mkdir(outside, 0o755))
	ws, err := Open(filepath.Join(base, "ws"))
	must(tb, err)
	tb.Cleanup(func() {
		ws.Close()
		if entries, _ := os.ReadDir(outside); len(entries) != 0 {
			tb.Errorf("outside the workspace %d entries appeared, first %s", len(entries), entries[0].Name())
		}
	})
	return ws, outside
}

// promptly fails the test when f does not return within a few seconds (a
// blocked open never returns at all).
func promptly(tb testing.TB, what string, f func() error) error {
	tb.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		tb.Fatalf("%s blocked", what)
		return nil
	}
}

func TestSpecialFilesRefused(t *testing.T) {
	ws, _ := outsideTree(t)
	r := ws.Root()
	must(t, syscall.Mkfifo(filepath.Join(r, "input", "pipe"), 0o644))
	must(t, os.Mkdir(filepath.Join(r, "input", "dir"), 0o755))
	calls := map[string]func(rel string) error{
		"OpenRead":  func(rel string) error { _, _, err := ws.OpenRead(rel); return err },
		"ReadFile":  func(rel string) error { _, err := ws.ReadFile(rel); return err },
		"Create":    func(rel string) error { _, err := ws.Create(rel); return err },
		"WriteFile": func(rel string) error { return ws.WriteFile(rel, []byte("x")) },
	}
	for name, f := range calls {
		t.Run(name, func(t *testing.T) {
			err := promptly(t, name, func() error { return f("input/pipe") })
			if !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), "named pipe") {
				t.Errorf("named pipe: %v, want ErrNotRegular naming it", err)
			}
			if err := f("input/dir"); !errors.Is(err, ErrIsDir) {
				t.Errorf("directory: %v, want ErrIsDir", err)
			}
		})
	}
	// With a reader at the other end the open succeeds and is refused by
	// its type, nothing written.
	rd, err := os.OpenFile(filepath.Join(r, "input", "pipe"), os.O_RDONLY|syscall.O_NONBLOCK, 0)
	must(t, err)
	defer rd.Close()
	if err := promptly(t, "WriteFile", func() error { return ws.WriteFile("input/pipe", []byte("x")) }); !errors.Is(err, ErrNotRegular) {
		t.Errorf("named pipe with a reader: %v, want ErrNotRegular", err)
	}
	must(t, os.Mkdir(filepath.Join(r, "logs", "p"), 0o755))
	must(t, syscall.Mkfifo(filepath.Join(r, "logs", "p", "pipe"), 0o644))
	if err := promptly(t, "OpenLog", func() error {
		_, err := ws.OpenLog("logs/p/pipe", os.O_WRONLY|os.O_APPEND|os.O_CREATE)
		return err
	}); !errors.Is(err, ErrNotRegular) {
		t.Errorf("OpenLog on a named pipe: %v, want ErrNotRegular", err)
	}
}

func TestWritesThroughSymlinksStayInside(t *testing.T) {
	ws, outside := outsideTree(t)
	r := ws.Root()
	must(t, os.RemoveAll(filepath.Join(r, "input")))
	must(t, os.Symlink(outside, filepath.Join(r, "input")))
	must(t, os.Symlink(filepath.Join(outside, "new.txt"), filepath.Join(r, "output", "dangling")))
	for _, rel := range []string{"input/a.txt", "input/deep/a.txt", "output/dangling"} {
		if _, err := ws.CreateNew(rel); !errors.Is(err, ErrOutside) {
			t.Errorf("CreateNew(%s): %v, want ErrOutside", rel, err)
		}
		if err := ws.WriteFile(rel, []byte("x")); !errors.Is(err, ErrOutside) {
			t.Errorf("WriteFile(%s): %v, want ErrOutside", rel, err)
		}
	}
	if err := ws.MkdirAll("input/sub"); !errors.Is(err, ErrOutside) {
		t.Errorf("MkdirAll: %v, want ErrOutside", err)
	}
	if _, err := ws.ReadDir("input"); !errors.Is(err, ErrOutside) {
		t.Errorf("ReadDir: %v, want ErrOutside", err)
	}
	// Inside the workspace a symlink still works, absolute or relative.
	must(t, os.Symlink(filepath.Join(r, "output"), filepath.Join(r, "abs")))
	must(t, ws.WriteFile("abs/x.txt", []byte("x")))
	if b, err := ws.ReadFile("output/x.txt"); err != nil || string(b) != "x" {
		t.Errorf("through an absolute link inside: %q, %v", b, err)
	}
}

func TestLogsStayInLogs(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, r, outside string)
		rel   string
		// replaced: WriteLog replaces the link itself (inside logs/)
		// rather than refuse it.
		replaced bool
	}{
		{"logs/ a link out", func(t *testing.T, r, outside string) {
			must(t, os.RemoveAll(filepath.Join(r, "logs")))
			must(t, os.Symlink(outside, filepath.Join(r, "logs")))
		}, "logs/movements/job1.jsonl", false},
		{"logs/ a link to output/", func(t *testing.T, r, outside string) {
			must(t, os.RemoveAll(filepath.Join(r, "logs")))
			must(t, os.Symlink("output", filepath.Join(r, "logs")))
		}, "logs/lessons.jsonl", false},
		{"logs/movements a link out", func(t *testing.T, r, outside string) {
			must(t, os.Symlink(outside, filepath.Join(r, "logs", "movements")))
		}, "logs/movements/job1.jsonl", false},
		{"logs/checklists a link to output/", func(t *testing.T, r, outside string) {
			must(t, os.Symlink("../output", filepath.Join(r, "logs", "checklists")))
		}, "logs/checklists/plan.json", false},
		{"logs/lessons.jsonl a link out", func(t *testing.T, r, outside string) {
			must(t, os.Symlink(filepath.Join(outside, "lessons.jsonl"), filepath.Join(r, "logs", "lessons.jsonl")))
		}, "logs/lessons.jsonl", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ws, outside := outsideTree(t)
			tt.setup(t, ws.Root(), outside)
			if f, err := ws.OpenLog(tt.rel, os.O_WRONLY|os.O_CREATE|os.O_APPEND); !errors.Is(err, ErrOutside) {
				if f != nil {
					f.Close()
				}
				t.Errorf("OpenLog: %v, want ErrOutside", err)
			}
			if err := ws.WriteLog(tt.rel, []byte("{}")); tt.replaced && err != nil {
				t.Errorf("WriteLog over a link: %v", err)
			} else if !tt.replaced && !errors.Is(err, ErrOutside) {
				t.Errorf("WriteLog: %v, want ErrOutside", err)
			}
			if files, _, _ := ws.Files("output", 0); len(files) != 0 {
				t.Errorf("records written to output/: %v", files)
			}
		})
	}
	ws, _ := outsideTree(t)
	must(t, ws.WriteLog("logs/checklists/plan.json", []byte("one")))
	must(t, ws.WriteLog("logs/checklists/plan.json", []byte("two")))
	f, err := ws.OpenLog("logs/lessons.jsonl", os.O_WRONLY|os.O_CREATE|os.O_APPEND)
	must(t, err)
	f.WriteString("line\n")
	f.Close()
	must(t, ws.RemoveLog("logs/lessons.jsonl"))
	entries, err := ws.ReadDir("logs/checklists")
	must(t, err)
	if len(entries) != 1 || entries[0].Name() != "plan.json" {
		t.Errorf("logs/checklists holds %v, want plan.json only (no temporary file)", entries)
	}
	if b, _ := ws.ReadFile("logs/checklists/plan.json"); string(b) != "two" {
		t.Errorf("checklist %q, want two", b)
	}
	for _, rel := range []string{"input/x", "logs", "logs/../input/x", "/etc/x", "logs/\x00"} {
		if err := ws.WriteLog(rel, nil); err == nil {
			t.Errorf("WriteLog(%q) succeeded", rel)
		}
	}
	if err := ws.WriteFile("logs/forged", nil); !errors.Is(err, ErrReadOnly) {
		t.Errorf("WriteFile into logs/: %v, want ErrReadOnly", err)
	}
}

// TestSwapRace swaps a folder for a symlink to outside, over and over,
// while files are written through it: nothing is ever written outside.
func TestSwapRace(t *testing.T) {
	ws, outside := outsideTree(t)
	r := ws.Root()
	must(t, os.Mkdir(filepath.Join(r, "output", "d"), 0o755))
	stop := workspacetest.Swap(t, filepath.Join(r, "output", "d"), outside)
	for i := range 2000 {
		ws.WriteFile("output/d/f.txt", []byte{byte(i)})
		if f, err := ws.CreateNew("output/d/n.txt"); err == nil {
			f.Close()
			ws.Remove("output/d/n.txt")
		}
		ws.MkdirAll("output/d/sub")
	}
	t.Logf("output/d: %d swaps", stop())
	must(t, os.MkdirAll(filepath.Join(r, "logs", "movements"), 0o755))
	stop = workspacetest.Swap(t, filepath.Join(r, "logs", "movements"), outside)
	for i := range 2000 {
		if f, err := ws.OpenLog("logs/movements/m.jsonl", os.O_WRONLY|os.O_CREATE|os.O_TRUNC); err == nil {
			f.Write([]byte{byte(i)})
			f.Close()
		}
		ws.WriteLog("logs/movements/c.json", []byte{byte(i)})
	}
	t.Logf("logs/movements: %d swaps", stop())
}

func TestWalkNeverFollows(t *testing.T) {
	ws, outside := outsideTree(t)
	r := ws.Root()
	must(t, os.WriteFile(filepath.Join(r, "output", "a.txt"), []byte("a"), 0o644))
	must(t, os.Symlink("/etc", filepath.Join(r, "output", "etc")))
	must(t, os.Symlink("/etc/passwd", filepath.Join(r, "output", "passwd")))
	must(t, os.Symlink("../input", filepath.Join(r, "output", "in")))
	must(t, os.WriteFile(filepath.Join(r, "input", "b.txt"), []byte("b"), 0o644))
	_ = outside
	var got []string
	must(t, ws.Walk("output", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		got = append(got, p+" "+d.Type().String())
		return nil
	}))
	want := []string{"output d---------", "output/a.txt ----------", "output/etc L---------", "output/in L---------", "output/passwd L---------"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Walk (-want +got):\n%s", diff)
	}
	err := ws.Walk("output/missing", func(p string, d fs.DirEntry, err error) error { return err })
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing folder: %v, want ErrNotExist", err)
	}
}

func TestSafeName(t *testing.T) {
	long := strings.Repeat("é", 150) + ".pdf"
	tests := []struct{ in, want string }{
		{"report.pdf", "report.pdf"},
		{"../../x", "x"},
		{"a/b/c.txt", "c.txt"},
		{`C:\Users\me\notes.txt`, "notes.txt"},
		{"input", "input"},
		{".", "attachment"},
		{"..", "attachment"},
		{"", "attachment"},
		{"dir/", "attachment"},
		{"a\x00b.txt", "a_b.txt"},
		{"a\nb\x7f.txt", "a_b_.txt"},
		{"bad\xffutf8", "bad_utf8"},
		{"  spaced.txt  ", "spaced.txt"},
		{long, strings.Repeat("é", 98) + ".pdf"},
	}
	for _, tt := range tests {
		got := SafeName(tt.in, "attachment")
		if got != tt.want {
			t.Errorf("SafeName(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if len(got) > maxName || strings.ContainsAny(got, "/\x00") {
			t.Errorf("SafeName(%q) = %q: not one short file name", tt.in, got)
		}
	}
}

// TestOpenIn: a file of input/ or output/ opens through a root on that
// folder: links inside it are followed, links out of it (to logs/, out of
// the workspace, absolute ones) are refused, and so are unclean paths,
// other folders, folders and special files.
func TestOpenIn(t *testing.T) {
	ws, _ := newTree(t)
	r := ws.Root()
	must(t, os.WriteFile(filepath.Join(r, "output", "report.md"), []byte("# report"), 0o644))
	must(t, os.WriteFile(filepath.Join(r, "logs", "secret.jsonl"), []byte("log"), 0o644))
	must(t, syscall.Mkfifo(filepath.Join(r, "output", "pipe"), 0o644))
	for _, tc := range []struct {
		folder, rel string
		want        string // content, or "" when refused with err
		err         error
	}{
		{Output, "report.md", "# report", nil},
		{Input, "a.txt", "a", nil},
		{Input, "in-rel", "a", nil},
		{Input, "in-abs", "", ErrOutside},
		{Input, "out-abs/passwd", "", ErrOutside},
		{Input, "out-rel/passwd", "", ErrOutside},
		{Input, "out-file", "", ErrOutside},
		{Input, "chain/passwd", "", ErrOutside},
		{Input, "sub/up/secret/passwd", "", ErrOutside},
		{Output, "to-logs/secret.jsonl", "", ErrOutside},
		{Output, "../logs/secret.jsonl", "", ErrOutside},
		{Output, "./report.md", "", ErrOutside},
		{Output, "/report.md", "", ErrOutside},
		{Output, "", "", ErrOutside},
		{Logs, "secret.jsonl", "", ErrOutside},
		{Input, "sub", "", ErrIsDir},
		{Output, "pipe", "", ErrNotRegular},
		{Output, "missing.md", "", fs.ErrNotExist},
	} {
		t.Run(tc.folder+"/"+tc.rel, func(t *testing.T) {
			f, fi, err := ws.OpenIn(tc.folder, tc.rel)
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Errorf("OpenIn = %v, want an error wrapping %v", err, tc.err)
				}
				if f != nil {
					f.Close()
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			b := make([]byte, 64)
			n, _ := f.Read(b)
			if string(b[:n]) != tc.want || fi.Size() != int64(len(tc.want)) {
				t.Errorf("read %q (size %d), want %q", b[:n], fi.Size(), tc.want)
			}
		})
	}

	// output/ itself swapped for a link to input/: refused, even inside.
	must(t, os.Rename(filepath.Join(r, "output"), filepath.Join(r, "output.old")))
	must(t, os.Symlink("input", filepath.Join(r, "output")))
	if f, _, err := ws.OpenIn(Output, "a.txt"); !errors.Is(err, ErrOutside) {
		if f != nil {
			f.Close()
		}
		t.Errorf("output/ as a link: %v, want ErrOutside", err)
	}
}
