package chat_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/chat"
	"github.com/baton-bot/baton/core/engine"
	"github.com/baton-bot/baton/core/policy"
)

// TestEgressApprovalAlwaysAllows: an approval of a connection says which
// host the agent wants to reach; !status lists the job's connections by
// host and port, outcome and bytes; Always allow stores a rule for that
// host and port in the channel, which the policy then answers with.
func TestEgressApprovalAlwaysAllows(t *testing.T) {
	w := newWorld(t, chat.Access{})
	ctx := context.Background()
	w.say("alice", "install it")
	j, err := w.store.ActiveJob(ctx, w.task().ID)
	if err != nil {
		t.Fatal(err)
	}
	if j, err = w.store.StartJob(ctx, j.ID, 1); err != nil {
		t.Fatal(err)
	}
	fin := core.Finish{To: core.JobWaitingApproval, ResumeMovement: "chat", Checkpoint: "{}", Approval: &core.Approval{
		Tool: engine.EgressTool, Arguments: `{"host":"pypi.org:443"}`, Subject: "pypi.org:443",
		Preview: "connect to pypi.org:443\nBash: pip install requests", Channel: "slack:C1", Requester: "slack:alice",
		Rule: "egress.default", CreatedAt: time.Now(), Deadline: time.Now().Add(time.Hour),
	}}
	fin.Outbox = w.svc.Finishing(ctx, j, fin)
	if j, err = w.store.FinishJob(ctx, j.ID, j.Attempt, fin); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{
		"allowed CONNECT github.com:443 (egress.allow[0]) via 140.82.112.3:443, 1 B up, 2 B down, 1ms",
		"asked CONNECT pypi.org:443 (egress.default): …",
		"allowed GET github.com:443 (egress.allow[0]) via 140.82.112.3:443, 10 B up, 20 B down, 1ms",
		"denied CONNECT [::1]:6379 (egress.default): no egress.allow entry covers [::1]:6379",
	} {
		if err := w.store.AddEvent(ctx, core.JobEvent{JobID: j.ID, At: time.Now(), Kind: core.EventEgress, Detail: d}); err != nil {
			t.Fatal(err)
		}
	}
	msgs := w.approvalMessages(j)
	w.say("alice", "!status")
	due, err := w.store.DueOutbox(ctx, core.PlatformSlack, time.Now().Add(time.Hour), 100)
	if err != nil {
		t.Fatal(err)
	}
	var status string
	for _, m := range due {
		if p, err := chat.DecodePayload(m.Payload); err == nil && strings.Contains(p.Text, "Task #") {
			status = p.Text
		}
	}
	if !strings.Contains(status, "Network: 4 connections (2 allowed, 1 denied, 1 asked): `github.com:443` allowed ×2, 11 B up, 22 B down; "+
		"`pypi.org:443` asked ×1, 0 B up, 0 B down; `[::1]:6379` denied ×1, 0 B up, 0 B down.") {
		t.Errorf("!status = %q", status)
	}
	if len(msgs) != 1 || !strings.Contains(msgs[0].Text, "The agent wants to reach `pypi.org:443` (egress.default)") ||
		!strings.Contains(msgs[0].Text, "pip install requests") {
		t.Fatalf("approval messages: %+v", msgs)
	}
	w.click(j, "always", "alice")
	d, err := policy.New(nil, w.store).Decide(ctx, policy.Request{Kind: policy.External, Tool: engine.EgressTool, Subject: "pypi.org:443", Channel: "slack:C1"})
	if err != nil || d.Action != policy.Allow {
		t.Errorf("after Always allow, the policy on pypi.org:443: %+v, %v", d, err)
	}
	d, _ = policy.New(nil, w.store).Decide(ctx, policy.Request{Kind: policy.External, Tool: engine.EgressTool, Subject: "pypi.org:80", Channel: "slack:C1"})
	if d.Action != policy.Ask {
		t.Errorf("another port of the host: %+v, want ask", d)
	}
}
