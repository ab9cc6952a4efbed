package workspace

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// owner is a store as Claim sees it.
type owner struct {
	id    string
	tasks []string // workspace directories
	asked int      // Workspaces calls
}

func (o *owner) StoreID(context.Context) (string, error) { return o.id, nil }

func (o *owner) Workspaces(context.Context) ([]string, error) {
	o.asked++
	return o.tasks, nil
}

// mkWorkspace makes root/name with a private file in it.
func mkWorkspace(t *testing.T, root, name string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(root, name, Input), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, name, Input, "private.txt"), []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestClaim(t *testing.T) {
	ctx := t.Context()
	t.Run("first start", func(t *testing.T) {
		root := filepath.Join(t.TempDir(), "workspaces")
		a := &owner{id: "aaaa"}
		got, err := Claim(ctx, root, a, Refuse)
		if err != nil || len(got.Foreign) != 0 {
			t.Fatalf("Claim of a missing directory = %+v, %v", got, err)
		}
		b, err := os.ReadFile(filepath.Join(root, ownerFile))
		if err != nil || string(b) != "aaaa\n" {
			t.Errorf("owner file = %q, %v", b, err)
		}
		// The store's own workspaces, owner file in place: not even listed.
		mkWorkspace(t, root, "1-00ff")
		if _, err := Claim(ctx, root, a, Refuse); err != nil || a.asked != 0 {
			t.Errorf("second Claim = %v after %d Workspaces calls; want nil, none", err, a.asked)
		}
	})
	t.Run("upgraded store", func(t *testing.T) {
		// Workspaces from before owner files, every one named by a task.
		root := t.TempDir()
		mkWorkspace(t, root, "1")
		mkWorkspace(t, root, "2")
		a := &owner{id: "aaaa", tasks: []string{"/elsewhere/spelt/differently/1", filepath.Join(root, "2")}}
		if got, err := Claim(ctx, root, a, Refuse); err != nil || len(got.Foreign) != 0 {
			t.Fatalf("Claim = %+v, %v; want the workspaces kept", got, err)
		}
	})
	for _, tc := range []struct {
		name      string
		policy    Policy
		wantErr   bool
		remaining []string
	}{
		{"refuse", Refuse, true, []string{"1", "2", "3-ab"}},
		{"adopt", Adopt, false, []string{"1", "2", "3-ab"}},
		{"discard", Discard, false, []string{"2"}},
	} {
		t.Run("new store/"+tc.name, func(t *testing.T) {
			// The old store named 1, 2 and 3-ab; the new one names only 2
			// (an older copy's, say, restored as a new store).
			root := t.TempDir()
			for _, n := range []string{"1", "2", "3-ab"} {
				mkWorkspace(t, root, n)
			}
			if err := writeOwner(root, "old"); err != nil {
				t.Fatal(err)
			}
			b := &owner{id: "bbbb", tasks: []string{filepath.Join(root, "2")}}
			got, err := Claim(ctx, root, b, tc.policy)
			if tc.wantErr != errors.Is(err, ErrForeign) {
				t.Fatalf("Claim(%v) = %v; want ErrForeign: %v", tc.policy, err, tc.wantErr)
			}
			if diff := cmp.Diff([]string{"1", "3-ab"}, got.Foreign); diff != "" {
				t.Errorf("Foreign (-want +got):\n%s", diff)
			}
			dirs, _ := workspaceDirs(root)
			if diff := cmp.Diff(tc.remaining, dirs); diff != "" {
				t.Errorf("workspaces left (-want +got):\n%s", diff)
			}
			owner, _ := os.ReadFile(filepath.Join(root, ownerFile))
			if want := map[bool]string{true: "old\n", false: "bbbb\n"}[tc.wantErr]; string(owner) != want {
				t.Errorf("owner file = %q, want %q", owner, want)
			}
			if tc.policy == Discard {
				if !strings.HasPrefix(got.MovedTo, filepath.Clean(root)+".discarded-") {
					t.Errorf("MovedTo = %q", got.MovedTo)
				}
				if b, err := os.ReadFile(filepath.Join(got.MovedTo, "3-ab", Input, "private.txt")); err != nil || string(b) != "secret" {
					t.Errorf("discarded workspace: %q, %v", b, err)
				}
			}
			// Claimed now: the next start asks nothing.
			if !tc.wantErr {
				if _, err := Claim(ctx, root, b, Refuse); err != nil {
					t.Errorf("Claim after %v: %v", tc.policy, err)
				}
			}
		})
	}
	t.Run("store lost, no owner file", func(t *testing.T) {
		root := t.TempDir()
		mkWorkspace(t, root, "1")
		_, err := Claim(ctx, root, &owner{id: "cccc"}, Refuse)
		if !errors.Is(err, ErrForeign) || !strings.Contains(err.Error(), "holds 1 (1)") {
			t.Errorf("Claim = %v; want ErrForeign naming workspace 1", err)
		}
	})
}

// TestDir: a new task's workspace is root/<id>-<16 hex digits>, and two
// tasks of the same id (a store started afresh) never share one.
func TestDir(t *testing.T) {
	a, b := Dir("/data/workspaces", 42), Dir("/data/workspaces", 42)
	re := regexp.MustCompile(`^/data/workspaces/42-[0-9a-f]{16}$`)
	if !re.MatchString(a) || !re.MatchString(b) {
		t.Errorf("Dir = %q, %q; want /data/workspaces/42-<16 hex digits>", a, b)
	}
	if a == b {
		t.Errorf("two workspaces of task 42 are both %q", a)
	}
}
