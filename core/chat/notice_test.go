package chat_test

import (
	"context"
	"testing"

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
