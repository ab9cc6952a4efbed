// Package storetest is the contract suite of core.Store: the behaviour every
// implementation shares, checked through the interface alone. Each
// implementation's tests run it with a function that opens a fresh store:
//
//	func TestContract(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) core.Store { return newStore(t) })
//	}
//
// tests of an engine itself (its files, locks, pools, migrations) stay
// beside the implementation. The suite imports only core and the standard
// library, and compares with its own small diff (see diff).
package storetest

import (
	"cmp"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-bot/baton/core"
)

// test is one contract test, given a store of its own.
type test struct {
	name string
	run  func(t *testing.T, s core.Store)
}

// areas groups the tests by the part of the contract they check; Run
// names its subtests area/test.
var areas = []struct {
	name  string
	tests []test
}{
	{"tasks", []test{
		{"EnsureTask", testEnsureTask},
		{"EnsureTaskErrors", testEnsureTaskErrors},
		{"Workspace", testWorkspace},
		{"RetireThread", testRetireThread},
	}},
	{"comments", []test{
		{"AddComment", testAddComment},
		{"CommentOriginal", testCommentOriginal},
		{"RecentComments", testRecentComments},
	}},
	{"task listing", []test{
		{"Tasks", testTasks},
	}},
	{"jobs", []test{
		{"CreateJob", testCreateJob},
		{"JobsActiveJobCount", testJobsActiveJobCount},
		{"JobTrigger", testJobTrigger},
		{"StartJob", testStartJob},
		{"StartJobTakeover", testStartJobTakeover},
		{"StartJobNotes", testStartJobNotes},
		{"FailJob", testFailJob},
		{"ResumeJob", testResumeJob},
		{"QueuedAt", testQueuedAt},
	}},
	{"transitions", []test{
		{"TransitionTable", testTransitionTable},
		{"TransitionErrors", testTransitionErrors},
	}},
	{"progress", []test{
		{"SaveProgress", testSaveProgress},
		{"SaveProgressEvents", testSaveProgressEvents},
	}},
	{"finish", []test{
		{"FinishJob", testFinishJob},
		{"FinishJobWritesEverything", testFinishJobWritesEverything},
		{"FinishJobAllOrNothing", testFinishJobAllOrNothing},
	}},
	{"abort", []test{
		{"RequestAbort", testRequestAbort},
		{"FinishAfterAbortRequest", testFinishAfterAbortRequest},
	}},
	{"events", []test{
		{"Events", testEvents},
	}},
	{"outbox", []test{
		{"AddOutboxSeq", testAddOutboxSeq},
		{"DueOutbox", testDueOutbox},
		{"DueOutboxOrder", testDueOutboxOrder},
		{"ClaimOutbox", testClaimOutbox},
		{"ClaimOutboxAfter", testClaimOutboxAfter},
		{"ReleaseOutbox", testReleaseOutbox},
		{"ClaimOutboxOrder", testClaimOutboxOrder},
		{"StatusMessage", testStatusMessage},
		{"RefMessage", testRefMessage},
		{"OutboxStats", testOutboxStats},
	}},
	{"inbound", []test{
		{"SeenInbound", testSeenInbound},
	}},
	{"ingest", []test{
		{"Ingest", testIngest},
		{"IngestWritesNothingInPart", testIngestWritesNothingInPart},
	}},
	{"inbox", []test{
		{"Inbox", testInbox},
	}},
	{"approvals", []test{
		{"Park", testApprovalPark},
		{"PendingAndExpired", testPendingAndExpiredApprovals},
		{"Decide", testDecideApproval},
		{"AbortDeniesApproval", testAbortDeniesApproval},
	}},
	{"allow rules", []test{
		{"AllowRules", testAllowRules},
	}},
	{"checkpoints", []test{
		{"TakeCheckpoint", testTakeCheckpoint},
	}},
	{"usage", []test{
		{"Usage", testUsage},
		{"WaitKind", testWaitKind},
	}},
	{"counts", []test{
		{"CountJobs", testCountJobs},
	}},
	{"leases", []test{
		{"Exclusive", testLeaseExclusive},
		{"Renew", testLeaseRenew},
		{"Expiry", testLeaseExpiry},
		{"Release", testLeaseRelease},
		{"Race", testLeaseRace},
	}},
	{"retention", []test{
		{"Prune", testPrune},
	}},
	{"concurrency", []test{
		{"ConcurrentWriters", testConcurrentWriters},
		{"EnsureTaskConcurrent", testEnsureTaskConcurrent},
		{"SeenInboundConcurrent", testSeenInboundConcurrent},
		{"StartJobRace", testStartJobRace},
		{"ClaimOutboxConcurrent", testClaimOutboxConcurrent},
		{"DecideApprovalConcurrent", testDecideApprovalConcurrent},
	}},
}

// Run runs the contract suite, one subtest per area and test
// ("tasks/EnsureTask"). open returns a new, empty, migrated store, closed
// when its t ends (open registers that with t.Cleanup); it is called once
// per test, with that test's t, so that an implementation can give each
// store what it needs of its own (a file, a schema, a workspace root
// under t.TempDir()).
func Run(t *testing.T, open func(t *testing.T) core.Store) {
	for _, area := range areas {
		t.Run(area.name, func(t *testing.T) {
			for _, tc := range area.tests {
				t.Run(tc.name, func(t *testing.T) {
					tc.run(t, open(t))
				})
			}
		})
	}
}

var threadN atomic.Int64

// newTask creates a task on a fresh Slack thread.
func newTask(t *testing.T, s core.Store) core.Task {
	t.Helper()
	ref := core.ThreadRef{Platform: core.PlatformSlack, Team: "T1", Channel: "C1", Thread: fmt.Sprintf("17000.%d", threadN.Add(1))}
	task, _, err := s.EnsureTask(t.Context(), core.Task{Thread: ref, OwnerUser: "U1", Title: "a task"})
	if err != nil {
		t.Fatalf("EnsureTask: %v", err)
	}
	return task
}

// newJob creates a queued job on a fresh task.
func newJob(t *testing.T, s core.Store) core.Job {
	t.Helper()
	task := newTask(t, s)
	j, err := s.CreateJob(t.Context(), core.Job{TaskID: task.ID, Piece: "default", Instruction: "do it"})
	if err != nil {
		t.Fatalf("CreateJob: %v", err)
	}
	return j
}

func mustJob(t *testing.T, s core.Store, id int64) core.Job {
	t.Helper()
	j, err := s.Job(t.Context(), id)
	if err != nil {
		t.Fatalf("Job(%d): %v", id, err)
	}
	return j
}

func eventKinds(t *testing.T, s core.Store, jobID int64) []string {
	t.Helper()
	evs, err := s.Events(t.Context(), jobID)
	if err != nil {
		t.Fatalf("Events(%d): %v", jobID, err)
	}
	var kinds []string
	for _, e := range evs {
		kinds = append(kinds, e.Kind)
	}
	return kinds
}

// withoutTimes clears the store-set timestamps of j, for comparisons that
// check them on their own.
func withoutTimes(j core.Job) core.Job {
	j.CreatedAt, j.QueuedAt, j.StartedAt, j.FinishedAt, j.AbortRequestedAt = time.Time{}, time.Time{}, time.Time{}, time.Time{}, time.Time{}
	return j
}

// platforms are the platforms drainOutbox delivers for.
var platforms = []core.Platform{core.PlatformSlack, core.PlatformDiscord, core.PlatformConsole, core.PlatformAPI, core.PlatformSubtask}

// drainOutbox delivers every pending message of every platform, as a
// deliverer does (DueOutbox, then OutboxSent), and returns them as they
// were when due: in Seq order within a task. It reads the outbox through
// the interface alone, at the price of leaving it delivered, so a test
// calls it once it is done writing. Messages due later than a century
// from now are not returned.
func drainOutbox(t *testing.T, s core.Store) []core.OutboxMessage {
	t.Helper()
	ctx := t.Context()
	later := time.Now().AddDate(100, 0, 0)
	var out []core.OutboxMessage
	for _, p := range platforms {
		for round := 0; ; round++ {
			msgs, err := s.DueOutbox(ctx, p, later, 0)
			if err != nil {
				t.Fatalf("DueOutbox(%s): %v", p, err)
			}
			if len(msgs) == 0 {
				break
			}
			if round > 10000 {
				t.Fatalf("DueOutbox(%s) still returns messages after %d deliveries", p, len(out))
			}
			for _, m := range msgs {
				out = append(out, m)
				if err := s.OutboxSent(ctx, m.ID, "drained"); err != nil {
					t.Fatalf("OutboxSent(%d): %v", m.ID, err)
				}
			}
		}
	}
	return out
}

// outboxWhere drains the outbox (see drainOutbox) and returns the
// messages keep accepts, sorted by less.
func outboxWhere(t *testing.T, s core.Store, keep func(core.OutboxMessage) bool, less func(a, b core.OutboxMessage) int) []core.OutboxMessage {
	t.Helper()
	var out []core.OutboxMessage
	for _, m := range drainOutbox(t, s) {
		if keep(m) {
			out = append(out, m)
		}
	}
	slices.SortStableFunc(out, less)
	return out
}

func byID(a, b core.OutboxMessage) int { return cmp.Compare(a.ID, b.ID) }

func bySeq(a, b core.OutboxMessage) int {
	return cmp.Or(cmp.Compare(a.TaskID, b.TaskID), cmp.Compare(a.Seq, b.Seq))
}

// bareOutbox returns msgs without their store-set ID and CreatedAt, for
// comparisons that check them on their own.
func bareOutbox(msgs []core.OutboxMessage) []core.OutboxMessage {
	var out []core.OutboxMessage
	for _, m := range msgs {
		m.ID, m.CreatedAt = 0, time.Time{}
		out = append(out, m)
	}
	return out
}

// bareEvents returns evs without their store-set ID and At, for
// comparisons that check them on their own.
func bareEvents(evs []core.JobEvent) []core.JobEvent {
	var out []core.JobEvent
	for _, e := range evs {
		e.ID, e.At = 0, time.Time{}
		out = append(out, e)
	}
	return out
}
