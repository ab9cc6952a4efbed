package chat_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/chat"
)

// TestNoticePostedInThread: a notice the engine has for a job's thread
// (a model server that cuts prompts) is posted there as a message.
func TestNoticePostedInThread(t *testing.T) {
	w := newWorld(t, chat.Access{})
	w.say("alice", "summarise the logs")
	w.outbox() // the acknowledgement
	if err := w.svc.Notice(context.Background(), w.task().ID, "The model server counted 2,048 prompt tokens; raise num_ctx."); err != nil {
		t.Fatal(err)
	}
	got := w.outbox()
	if len(got) != 1 || got[0] != "post The model server counted 2,048 prompt tokens; raise num_ctx." {
		t.Errorf("outbox %q, want the notice posted in the thread", got)
	}
}

// TestStatusCachedShare: !status says which share of the job's prompt
// tokens the provider served from its cache, over the job's usage events
// (those with usage reported).
func TestStatusCachedShare(t *testing.T) {
	w := newWorld(t, chat.Access{})
	ctx := context.Background()
	w.say("alice", "summarise the logs")
	j, err := w.store.ActiveJob(ctx, w.task().ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{
		"prompt=2000 completion=10 cached=0 reported=true cached_share=0%",
		"prompt=3000 completion=10 cached=1920 reported=true cached_share=38%",
		"prompt=5000 completion=10 cached=4736 reported=true cached_share=66%",
		"prompt=9000 completion=0 cached=0 reported=false cached_share=66%", // an estimate: not counted
	} {
		if err := w.store.AddEvent(ctx, core.JobEvent{JobID: j.ID, At: time.Now(), Kind: "usage", Detail: d}); err != nil {
			t.Fatal(err)
		}
	}
	w.outbox()
	w.say("alice", "!status")
	got := strings.Join(w.outbox(), "\n")
	// (1920 + 4736) / (2000 + 3000 + 5000) = 66 %
	if !strings.Contains(got, "66 % of the prompt tokens came from the provider's prompt cache.") {
		t.Errorf("!status = %q, want the cached share", got)
	}
}
