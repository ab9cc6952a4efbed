package workspace

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// newTree opens a workspace next to a directory "secret" outside it, with
// symlinks (absolute, relative, dangling, chained) pointing in and out.
func newTree(tb testing.TB) (*Workspace, string) {
	tb.Helper()
	base := tb.TempDir()
	outside := filepath.Join(base, "secret")
	must(tb, os.MkdirAll(outside, 0o755))
	must(tb, os.WriteFile(filepath.Join(outside, "passwd"), []byte("root"), 0o644))
	ws, err := Open(filepath.Join(base, "ws"))
	must(tb, err)
	r := ws.Root()
	must(tb, os.MkdirAll(filepath.Join(r, "input", "sub"), 0o755))
	must(tb, os.WriteFile(filepath.Join(r, "input", "a.txt"), []byte("a"), 0o644))
	for name, target := range map[string]string{
		"input/out-abs":     outside,
		"input/out-rel":     "../../secret",
		"input/out-file":    filepath.Join(outside, "passwd"),
		"input/dangling":    filepath.Join(outside, "nothing-here"),
		"input/dangling-in": "not-yet.txt",
		"input/in-rel":      "a.txt",
		"input/in-abs":      filepath.Join(r, "input", "a.txt"),
		"input/chain":       "out-rel",
		"input/loop":        "loop",
		"input/sub/up":      "../../..",
		"output/to-logs":    "../logs",
	} {
		must(tb, os.Symlink(target, filepath.Join(r, filepath.FromSlash(name))))
	}
	return ws, outside
}

func must(tb testing.TB, err error) {
	tb.Helper()
	if err != nil {
		tb.Fatal(err)
	}
}

func TestOpenCreatesFolders(t *testing.T) {
	ws, err := Open(filepath.Join(t.TempDir(), "42"))
	if err != nil {
		t.Fatal(err)
	}
	for _, sub := range []string{Input, Output, Logs} {
		fi, err := os.Stat(filepath.Join(ws.Root(), sub))
		if err != nil || !fi.IsDir() {
			t.Errorf("%s: not a directory (%v)", sub, err)
		}
	}
}

func TestResolve(t *testing.T) {
	ws, _ := newTree(t)
	r := ws.Root()
	tests := []struct {
		in      string
		want    string // relative to root; "" when refused
		outside bool
	}{
		{in: "", want: "."},
		{in: ".", want: "."},
		{in: "input/a.txt", want: "input/a.txt"},
		{in: "input/../output/x", want: "output/x"},
		{in: "input/new/dir/file", want: "input/new/dir/file"},
		{in: "input/in-rel", want: "input/a.txt"},
		{in: "input/in-abs", want: "input/a.txt"},
		{in: "input/dangling-in", want: "input/not-yet.txt"},
		{in: "../../etc/passwd", outside: true},
		{in: "..", outside: true},
		{in: "input/../../x", outside: true},
		{in: "/etc/passwd", outside: true},
		{in: "input/out-abs", outside: true},
		{in: "input/out-abs/passwd", outside: true},
		{in: "input/out-rel/passwd", outside: true},
		{in: "input/out-file", outside: true},
		{in: "input/dangling", outside: true},
		{in: "input/chain/passwd", outside: true},
		{in: "input/sub/up/x", outside: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ws.Resolve(tt.in)
			if tt.outside {
				if !errors.Is(err, ErrOutside) {
					t.Fatalf("Resolve(%q) = %q, %v; want ErrOutside", tt.in, got, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Resolve(%q): %v", tt.in, err)
			}
			if diff := cmp.Diff(filepath.Join(r, tt.want), got); diff != "" {
				t.Errorf("Resolve(%q) (-want +got):\n%s", tt.in, diff)
			}
		})
	}
	if _, err := ws.Resolve("input/loop"); err == nil || !strings.Contains(err.Error(), "symbolic links") {
		t.Errorf("loop: got %v, want too many links", err)
	}
}

func TestResolveWrite(t *testing.T) {
	ws, _ := newTree(t)
	tests := []struct {
		in      string
		wantErr error
	}{
		{in: "output/report.md"},
		{in: "input/a.txt"},
		{in: "logs/x", wantErr: ErrReadOnly},
		{in: "logs", wantErr: ErrReadOnly},
		{in: "output/../logs/x", wantErr: ErrReadOnly},
		{in: "output/to-logs/x", wantErr: ErrReadOnly},
		{in: "../x", wantErr: ErrOutside},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			_, err := ws.ResolveWrite(tt.in)
			if tt.wantErr == nil && err != nil {
				t.Fatalf("ResolveWrite(%q): %v", tt.in, err)
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Fatalf("ResolveWrite(%q) = %v, want %v", tt.in, err, tt.wantErr)
			}
		})
	}
	if _, err := ws.ResolveWrite("."); err == nil {
		t.Error("ResolveWrite(.) succeeded, want an error")
	}
}

func TestFiles(t *testing.T) {
	ws, _ := newTree(t)
	r := ws.Root()
	must(t, os.WriteFile(filepath.Join(r, "input", "sub", "b.txt"), []byte("bbb"), 0o644))
	must(t, os.WriteFile(filepath.Join(r, "input", "c.txt"), []byte("cc"), 0o644))
	at := time.Date(2025, 3, 1, 12, 0, 0, 0, time.Local)
	for i, name := range []string{"a.txt", "c.txt", "sub/b.txt"} {
		mod := at.Add(time.Duration(i) * time.Minute)
		must(t, os.Chtimes(filepath.Join(r, "input", filepath.FromSlash(name)), mod, mod))
	}

	got, more, err := ws.Files("input", 0)
	if err != nil {
		t.Fatal(err)
	}
	want := []FileInfo{{"input/a.txt", 1, at}, {"input/c.txt", 2, at.Add(time.Minute)}, {"input/sub/b.txt", 3, at.Add(2 * time.Minute)}}
	if diff := cmp.Diff(want, got); diff != "" || more != 0 {
		t.Errorf("Files (-want +got):\n%s more=%d", diff, more)
	}

	got, more, err = ws.Files("input", 2)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want[:2], got); diff != "" || more != 1 {
		t.Errorf("Files max 2 (-want +got):\n%s more=%d", diff, more)
	}

	got, more, err = ws.Files("output/missing", 10)
	if err != nil || len(got) != 0 || more != 0 {
		t.Errorf("missing folder: %v %d %v", got, more, err)
	}
	if _, _, err := ws.Files("input/out-abs", 10); !errors.Is(err, ErrOutside) {
		t.Errorf("listing through a symlink to outside: %v, want ErrOutside", err)
	}
}

func FuzzResolve(f *testing.F) {
	for _, s := range []string{"", ".", "input/a.txt", "../../etc/passwd", "/etc/passwd",
		"input/out-abs/passwd", "input/out-rel", "input/chain/../x", "input/sub/up/secret",
		"input/dangling", "a/../../b", "input//./a.txt", "input/in-rel/..", "output/to-logs/../.."} {
		f.Add(s)
	}
	ws, _ := newTree(f)
	root := ws.Root()
	f.Fuzz(func(t *testing.T, rel string) {
		got, err := ws.Resolve(rel)
		if err != nil {
			return
		}
		assertInside(t, root, got)
		// Whatever exists of the resolved path must also be inside once the
		// kernel evaluates its symlinks.
		for p := got; ; p = filepath.Dir(p) {
			if real, err := filepath.EvalSymlinks(p); err == nil {
				assertInside(t, root, real)
				break
			}
			if p == root || p == "/" {
				break
			}
		}
	})
}

func assertInside(tb testing.TB, root, p string) {
	tb.Helper()
	r, err := filepath.Rel(root, p)
	if err != nil || r == ".." || strings.HasPrefix(r, "../") || filepath.IsAbs(r) {
		tb.Fatalf("%s is outside %s", p, root)
	}
}

func TestOpenLazyThenPrepare(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ws", "7")
	w, err := OpenLazy(dir)
	if err != nil {
		t.Fatal(err)
	}
	exists := func(sub string) bool {
		fi, err := os.Stat(filepath.Join(w.Root(), sub))
		return err == nil && fi.IsDir()
	}
	if !exists(Logs) || exists(Input) || exists(Output) {
		t.Fatalf("after OpenLazy: logs %v, input %v, output %v; want logs only", exists(Logs), exists(Input), exists(Output))
	}
	if files, _, err := w.Files(Input, 0); err != nil || len(files) != 0 {
		t.Errorf("listing a missing input/: %v, %v", files, err)
	}
	for range 2 { // a second Prepare finds them there
		if err := w.Prepare(); err != nil {
			t.Fatal(err)
		}
	}
	if !exists(Input) || !exists(Output) {
		t.Errorf("after Prepare: input %v, output %v", exists(Input), exists(Output))
	}
}
