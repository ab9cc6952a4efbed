package workspace

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func write(t testing.TB, path string, n int) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, make([]byte, n), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestMeasure(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "a", "b", "big"), 100_000)
	write(t, filepath.Join(dir, "one"), 1)
	// A 10 GB sparse file takes no blocks, but counts its length.
	f, err := os.Create(filepath.Join(dir, "sparse"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(10 << 30); err != nil {
		t.Fatal(err)
	}
	f.Close()
	// A link is counted, not followed: its target outside holds 1 MB.
	outside := filepath.Join(t.TempDir(), "outside")
	write(t, filepath.Join(outside, "x"), 1<<20)
	if err := os.Symlink(outside, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	u, err := Measure(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	lo := int64(10<<30 + 100_000 + 1)
	if u.Bytes < lo || u.Bytes > lo+1<<20 || u.Entries != 6 || u.Partial {
		t.Errorf("Measure = %+v; want about %d bytes in 6 entries, the link's target not counted", u, lo)
	}
}

func TestMeasureBounds(t *testing.T) {
	dir := t.TempDir()
	deep := dir
	for i := 0; i < MaxDepth+5; i++ {
		deep = filepath.Join(deep, "d")
	}
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	u, err := Measure(t.Context(), dir)
	if err != nil || !u.Partial || u.Entries != MaxDepth {
		t.Errorf("Measure of %d levels = %+v, %v; want partial after %d", MaxDepth+5, u, err, MaxDepth)
	}
}

// TestMeasureManyFiles: 100,000 files are measured in one walk short
// enough to run after every writing call (the time is logged, not
// asserted: machines differ).
func TestMeasureManyFiles(t *testing.T) {
	if testing.Short() {
		t.Skip("creates 100,000 files")
	}
	dir := t.TempDir()
	for i := range 100 {
		sub := filepath.Join(dir, fmt.Sprint(i))
		if err := os.Mkdir(sub, 0o755); err != nil {
			t.Fatal(err)
		}
		for j := range 1000 {
			f, err := os.Create(filepath.Join(sub, fmt.Sprint(j)))
			if err != nil {
				t.Fatal(err)
			}
			f.Close()
		}
	}
	start := time.Now()
	u, err := Measure(t.Context(), dir)
	if err != nil || u.Entries != 100_100 || u.Partial {
		t.Fatalf("Measure = %+v, %v", u, err)
	}
	t.Logf("100,100 entries measured in %v", time.Since(start))
}

// fakeFree is a file system whose free space the test sets.
type fakeFree struct{ free int64 }

func (f *fakeFree) statfs(string) (int64, error) { return f.free, nil }

func TestFloor(t *testing.T) {
	var logs strings.Builder
	disk := &fakeFree{free: 5 << 30}
	fl := NewFloor(FloorConfig{Dir: "/data", MinFreeBytes: 1 << 30, Statfs: disk.statfs, Logger: newTextLogger(&logs)})
	if err := fl.Check(); err != nil {
		t.Fatalf("5 GiB free: %v", err)
	}
	disk.free = 100 << 20
	for range 3 {
		var le *LimitError
		if err := fl.Check(); !errors.Is(err, ErrLowSpace) || !errors.As(err, &le) || le.Used != 100<<20 || le.Limit != 1<<30 {
			t.Errorf("100 MiB free: %v, want ErrLowSpace with both numbers", err)
		}
	}
	disk.free = 2 << 30
	if err := fl.Check(); err != nil {
		t.Errorf("2 GiB free again: %v", err)
	}
	if n := strings.Count(logs.String(), "below its free-space floor"); n != 1 {
		t.Errorf("logged the floor %d times, want once:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), "has room again") {
		t.Errorf("no line when space came back:\n%s", logs.String())
	}
	if err := NewFloor(FloorConfig{Dir: t.TempDir(), MinFreeBytes: 1}).Check(); err != nil {
		t.Errorf("the real statfs: %v", err)
	}
}

// TestQuota: over the cap, writing calls are refused and deleting ones
// run; deleting files brings the workspace back; a deleting call that
// grows the workspace while over it stops those too.
func TestQuota(t *testing.T) {
	ctx := t.Context()
	ws, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	disk := &fakeFree{free: 10 << 30}
	q := NewQuota(ws, 1<<20, NewFloor(FloorConfig{Dir: ws.Root(), MinFreeBytes: 1 << 30, Statfs: disk.statfs}))
	admit := func(deletes bool, want error) {
		t.Helper()
		if err := q.Admit(ctx, Call{Deletes: deletes}); !errors.Is(err, want) && !(want == nil && err == nil) {
			t.Fatalf("Admit(deletes=%v) = %v, want %v", deletes, err, want)
		}
	}
	update := func(deletes bool) QuotaStatus {
		t.Helper()
		st, err := q.Update(ctx, Call{Deletes: deletes})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	admit(false, nil)
	write(t, filepath.Join(ws.Root(), "output", "a"), 600<<10)
	if st := update(false); st.Over {
		t.Fatalf("600 KiB over a 1 MiB cap: %+v", st)
	}
	admit(false, nil)
	write(t, filepath.Join(ws.Root(), "output", "b"), 600<<10)
	if st := update(false); !st.Over || st.Usage.Bytes <= 1<<20 {
		t.Fatalf("1.2 MiB: %+v, want over", st)
	}
	admit(false, ErrOverCap)
	admit(true, nil) // Bash may run, to delete
	os.Remove(filepath.Join(ws.Root(), "output", "b"))
	if st := update(true); st.Over || !st.Back {
		t.Fatalf("after deleting b: %+v, want under again", st)
	}
	admit(false, nil)

	// Over again, and a deleting call that adds instead.
	write(t, filepath.Join(ws.Root(), "output", "b"), 600<<10)
	update(false)
	admit(true, nil)
	write(t, filepath.Join(ws.Root(), "output", "c"), 10)
	if st := update(true); !st.Over || !st.Grew {
		t.Fatalf("a deleting call grew the workspace: %+v, want Grew", st)
	}
	var le *LimitError
	if err := q.Admit(ctx, Call{Deletes: true}); !errors.As(err, &le) || !le.Grew {
		t.Fatalf("Admit(deletes) after it grew = %v, want a refusal saying so", err)
	}
	// Deleted by other means (a person, an earlier check): back.
	os.Remove(filepath.Join(ws.Root(), "output", "b"))
	os.Remove(filepath.Join(ws.Root(), "output", "c"))
	update(false)
	admit(true, nil)
	admit(false, nil)

	disk.free = 1 << 20
	admit(false, ErrLowSpace)
	admit(true, ErrLowSpace)

	// A fresh quota measures before its first call.
	write(t, filepath.Join(ws.Root(), "output", "big"), 2<<20)
	if err := NewQuota(ws, 1<<20, nil).Admit(ctx, Call{}); !errors.Is(err, ErrOverCap) {
		t.Errorf("fresh quota over a 2 MiB workspace: %v, want ErrOverCap", err)
	}
	if err := NewQuota(ws, 0, nil).Admit(ctx, Call{}); err != nil {
		t.Errorf("no cap: %v", err)
	}
}

func newTextLogger(w io.Writer) *slog.Logger { return slog.New(slog.NewTextHandler(w, nil)) }

// TestQuotaCountsOneFile: a call that writes one named file is counted by
// that file's change, without a walk, and lands where a walk would.
func TestQuotaCountsOneFile(t *testing.T) {
	ctx := t.Context()
	ws, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	q := NewQuota(ws, 1<<20, nil)
	call := Call{Path: "output/a"}
	steps := []int{300 << 10, 900 << 10, 10}
	for i, n := range steps {
		if err := q.Admit(ctx, call); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		write(t, filepath.Join(ws.Root(), "output", "a"), n)
		// A file the call did not name: not seen until the next walk.
		if i == 0 {
			write(t, filepath.Join(ws.Root(), "input", "unseen"), 5)
		}
		st, err := q.Update(ctx, call)
		if err != nil {
			t.Fatal(err)
		}
		walked, _ := Measure(ctx, ws.Root())
		if unseen := charge(filepath.Join(ws.Root(), "input", "unseen")); st.Usage.Bytes != walked.Bytes-unseen {
			t.Errorf("step %d: counted %d, a walk %d less the unseen file's %d", i, st.Usage.Bytes, walked.Bytes, unseen)
		}
		if want := n > 1<<20-8<<10; st.Over != want {
			t.Errorf("step %d (%d bytes): Over = %v", i, n, st.Over)
		}
	}
}
