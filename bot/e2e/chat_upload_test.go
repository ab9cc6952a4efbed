package e2e_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/llmtest"
)

// TestOutputOverTheCapNotUploaded: the job writes one file over
// files.max_bytes and one at it; the one at the cap is uploaded, the one
// over it is not, and a post after the uploads names it, its size, the
// limit and that it stays in the workspace.
func TestChatOutputOverTheCapNotUploaded(t *testing.T) {
	const limit = 1000
	sys := startStack(t, stackOptions{MaxFileBytes: limit})
	w := &chatWorld{t: t, srv: sys.LLM, store: sys.Store, svc: sys.Service}
	sys.LLM.Script(
		llmtest.Call("Write", fmt.Sprintf(`{"path":"output/big.bin","content":%q}`, strings.Repeat("b", 39*limit))),
		llmtest.Call("Write", fmt.Sprintf(`{"path":"output/small.md","content":%q}`, strings.Repeat("s", limit))),
		llmtest.Transition("COMPLETE", "Both files are ready."),
	)
	w.say("alice", "write the files")
	w.waitJob(core.JobSucceeded)
	var got []string
	for _, o := range w.outbox() {
		if strings.HasPrefix(o, "upload ") || strings.Contains(o, "output/") {
			got = append(got, o)
		}
	}
	want := []string{
		"upload output/small.md",
		"post output/big.bin (39 kB) is over the 1.0 kB upload limit and was not sent; it stays in the task's workspace.",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("uploads and notes (-want +got):\n%s", diff)
	}
}
