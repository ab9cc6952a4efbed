package main

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/baton-bot/baton/core/llmtest"
)

// dropStore deletes the store's file as a lost disk or a wiped volume
// would, leaving the workspaces.
func dropStore(t *testing.T, dataDir string) {
	t.Helper()
	for _, suffix := range []string{"", "-wal", "-shm"} {
		if err := os.Remove(filepath.Join(dataDir, "baton.db"+suffix)); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
}

// workspaceOf returns the task number and workspace `baton run` printed.
func workspaceOf(t *testing.T, stderr string) (string, string) {
	t.Helper()
	m := regexp.MustCompile(`task #(\d+), job #\d+, piece \S+\nbaton: workspace (\S+)`).FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("stderr does not name the task and workspace:\n%s", stderr)
	}
	return m[1], m[2]
}

// TestStoreLostWorkspacesKept: with the store deleted and the workspaces
// left, Baton refuses to start (exit 2, naming both flags) rather than
// give the next person's task #1 the old task #1's files;
// --adopt-workspaces starts with the old workspaces kept apart, and
// --discard-workspaces moves them out of workspaces/.
func TestStoreLostWorkspacesKept(t *testing.T) {
	n := newNewcomer(t)
	data := n.env["BATON_DATA_DIR"]
	n.srv.Script(
		llmtest.Call("Write", `{"path":"output/private.txt","content":"alice's secret"}`),
		llmtest.Call("transition", `{"next_step":"COMPLETE","summary":"Noted."}`),
	)
	code, stdout, stderr := n.run("keep my secret")
	if code != 0 {
		t.Fatalf("first run: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	oldTask, oldWS := workspaceOf(t, stderr)
	if b, err := os.ReadFile(filepath.Join(oldWS, "output", "private.txt")); err != nil || string(b) != "alice's secret" {
		t.Fatalf("the first task's file: %q, %v", b, err)
	}

	dropStore(t, data)
	code, stdout, stderr = n.run("what is in output/?")
	if code != 2 || !strings.Contains(stderr, "--adopt-workspaces") || !strings.Contains(stderr, "--discard-workspaces") {
		t.Fatalf("run on a new store beside old workspaces: exit %d, want 2 naming both flags\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	if len(n.srv.Requests()) != 2 {
		t.Errorf("the refused start sent %d model requests", len(n.srv.Requests())-2)
	}

	// Adopted: the new task #1 gets a directory of its own.
	n.srv.Script(
		llmtest.Call("Read", `{"path":"output/private.txt"}`),
		llmtest.Call("transition", `{"next_step":"COMPLETE","summary":"Looked."}`),
	)
	code, stdout, stderr = n.run("--adopt-workspaces", "what is in output/private.txt?")
	if code != 0 {
		t.Fatalf("--adopt-workspaces: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	newTask, newWS := workspaceOf(t, stderr)
	if newTask != oldTask || newWS == oldWS {
		t.Errorf("new task #%s in %s, old task #%s in %s: want the same number in another directory", newTask, newWS, oldTask, oldWS)
	}
	for _, r := range n.srv.Requests()[2:] {
		for _, m := range r.Messages {
			if strings.Contains(m.Text(), "alice's secret") {
				t.Fatalf("the new task saw the old task's file: %q", m.Text())
			}
		}
	}
	if _, err := os.Stat(filepath.Join(oldWS, "output", "private.txt")); err != nil {
		t.Errorf("the adopted workspace lost its file: %v", err)
	}
	// Claimed: later starts ask nothing.
	n.srv.Script(llmtest.Call("transition", `{"next_step":"COMPLETE","summary":"Again."}`))
	if code, _, stderr := n.run("again"); code != 0 {
		t.Fatalf("run after adopting: exit %d\n%s", code, stderr)
	}

	// Discarded: no workspace is left in workspaces/.
	dropStore(t, data)
	n.srv.Script(llmtest.Call("transition", `{"next_step":"COMPLETE","summary":"Fresh."}`))
	code, stdout, stderr = n.run("--discard-workspaces", "start afresh")
	if code != 0 {
		t.Fatalf("--discard-workspaces: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	_, freshWS := workspaceOf(t, stderr)
	ents, err := os.ReadDir(filepath.Join(data, "workspaces"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.IsDir() && filepath.Join(data, "workspaces", e.Name()) != freshWS {
			t.Errorf("workspaces/%s is still there after --discard-workspaces", e.Name())
		}
	}
	moved, _ := filepath.Glob(filepath.Join(data, "workspaces.discarded-*", filepath.Base(oldWS), "output", "private.txt"))
	if len(moved) != 1 {
		t.Errorf("the discarded workspace is not under workspaces.discarded-*/: %v", moved)
	}
}

// TestRunFlagsExcludeEachOther: asking for both is a usage error.
func TestRunFlagsExcludeEachOther(t *testing.T) {
	n := newNewcomer(t)
	code, _, stderr := n.run("--adopt-workspaces", "--discard-workspaces", "hi")
	if code != 2 || !strings.Contains(stderr, "exclude each other") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
}

// TestReadyzStoreReplaced: the store's file replaced under a running
// baton serve turns /readyz false and is logged once.
func TestReadyzStoreReplaced(t *testing.T) {
	data := t.TempDir()
	conf := writeConfig(t, "http:\n  addr: 127.0.0.1:0\ntools:\n  bash:\n    sandbox: none\n")
	r := runBackground(t, map[string]string{"BATON_DATA_DIR": data, "OPENAI_API_KEY": "sk-test"}, "serve", "--config", conf)
	defer r.stop()
	base := "http://" + r.logged(t, `baton serve started" http=(\S+)`)
	readyz := func() (int, string) {
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b strings.Builder
		_, _ = io.Copy(&b, resp.Body)
		return resp.StatusCode, b.String()
	}
	if code, body := readyz(); code != http.StatusOK {
		t.Fatalf("/readyz = %d %q before", code, body)
	}
	path := filepath.Join(data, "baton.db")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path+".copy", b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".copy", path); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if code, body := readyz(); code != http.StatusServiceUnavailable || !strings.Contains(body, "deleted or replaced") {
			t.Errorf("/readyz = %d %q after the file was replaced; want 503 saying so", code, body)
		}
	}
	r.stop()
	select {
	case <-r.done:
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop")
	}
	if n := strings.Count(r.stderr.String(), "deleted or replaced under this process"); n != 1 {
		t.Errorf("logged %d times, want once:\n%s", n, r.stderr.String())
	}
}

// TestWorkspacesRootElsewhere: workspaces.root puts the tasks' workspaces
// outside data_dir (a volume shared by several hosts), and the agent's
// files land there.
func TestWorkspacesRootElsewhere(t *testing.T) {
	n := newNewcomer(t)
	root := filepath.Join(t.TempDir(), "shared")
	n.env["BATON_WORKSPACES_ROOT"] = root
	n.srv.Script(
		llmtest.Call("Write", `{"path":"output/note.txt","content":"on the shared volume"}`),
		llmtest.Call("transition", `{"next_step":"COMPLETE","summary":"Written."}`),
	)
	code, stdout, stderr := n.run("write a note")
	if code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	_, ws := workspaceOf(t, stderr)
	if !strings.HasPrefix(ws, root+string(filepath.Separator)) {
		t.Errorf("workspace %s is not under workspaces.root %s", ws, root)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "output", "note.txt")); err != nil || string(b) != "on the shared volume" {
		t.Errorf("the note: %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(n.env["BATON_DATA_DIR"], "workspaces")); !os.IsNotExist(err) {
		t.Errorf("data_dir/workspaces exists beside workspaces.root: %v", err)
	}
}
