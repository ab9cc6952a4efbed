package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/baton-bot/baton/core"
)

// TestServePrunes: baton serve prunes the store past retention's ages in
// the background — a closed task's comments older than retention.comments
// go, a newer one stays — and counts what it removed in
// baton_retention_pruned_total.
func TestServePrunes(t *testing.T) {
	dataDir := t.TempDir()
	ctx := context.Background()
	st, err := openStore(ctx, Config{DataDir: dataDir}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	task, _, err := st.EnsureTask(ctx, core.Task{Thread: core.ThreadRef{Platform: core.PlatformConsole, Channel: "run", Thread: "old"}, Title: "old"})
	if err != nil {
		t.Fatal(err)
	}
	for _, at := range []time.Time{time.Now().AddDate(-2, 0, 0), time.Now().AddDate(-2, 0, 1), time.Now()} {
		if _, err := st.AddComment(ctx, core.Comment{TaskID: task.ID, Role: core.RoleUser, Text: "hi", CreatedAt: at}); err != nil {
			t.Fatal(err)
		}
	}
	st.Close()

	conf := writeConfig(t, "http:\n  addr: 127.0.0.1:0\nadmin:\n  addr: 127.0.0.1:0\ntools:\n  bash:\n    sandbox: none\n")
	r := runBackground(t, map[string]string{"BATON_DATA_DIR": dataDir, "OPENAI_API_KEY": "sk-test"}, "serve", "--config", conf)
	defer r.stop()
	admin := "http://" + r.logged(t, `admin endpoints on" addr=(\S+)`)
	r.logged(t, `retention: pruned".* comments=(2)`)
	resp, err := http.Get(admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := `baton_retention_pruned_total{kind="comments"} 2`; !strings.Contains(string(body), want) {
		t.Errorf("/metrics lacks %s", want)
	}
	r.stop()
	if code := <-r.done; code != 0 {
		t.Fatalf("serve exit %d:\n%s", code, r.stderr.String())
	}
	st, err = openStore(ctx, Config{DataDir: dataDir}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	left, err := st.RecentComments(ctx, task.ID, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 1 || left[0].CreatedAt.Before(time.Now().AddDate(-1, 0, 0)) {
		t.Errorf("comments left = %+v, want the recent one only", left)
	}
}
