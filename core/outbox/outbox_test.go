package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/chat"
	"github.com/baton-bot/baton/core/outbox"
	"github.com/google/go-cmp/cmp"
)

var slackLimits = chat.Limits{Post: 3000, Update: 3800, MaxParts: 4}

// failTimes fails the calls whose text is text, n times, with err.
func failTimes(text string, n int, err error) func(call) error {
	var mu sync.Mutex
	left := n
	return func(c call) error {
		mu.Lock()
		defer mu.Unlock()
		if c.Text == text && left > 0 {
			left--
			return err
		}
		return nil
	}
}

func TestOrderPerTask(t *testing.T) {
	h := newHarness(t, slackLimits, outbox.Config{}, failTimes("m1", 2, errors.New("503 service unavailable")))
	task := h.task(t, "C1")
	for i := 1; i <= 5; i++ {
		h.post(t, task, fmt.Sprintf("m%d", i))
	}
	h.rounds(t, 10, time.Second)

	want := []string{"post:m1", "post:m1", "post:m1", "post:m2", "post:m3", "post:m4", "post:m5"}
	if diff := cmp.Diff(want, texts(h.poster.Calls(false))); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
	if h.poster.Overlapped() {
		t.Error("two deliveries of one thread overlapped")
	}
}

func TestTasksProgressIndependently(t *testing.T) {
	release := make(chan struct{})
	h := newHarness(t, slackLimits, outbox.Config{Poll: 5 * time.Millisecond}, func(c call) error {
		if c.Text == "a1" {
			<-release // a slow platform call in task A
		}
		return nil
	})
	a, b := h.task(t, "C1"), h.task(t, "C2")
	h.post(t, a, "a1")
	h.post(t, a, "a2")
	h.post(t, b, "b1")
	h.post(t, b, "b2")
	h.post(t, b, "b3")

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- h.d.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})

	eventually(t, "task B's three posts", func() bool { return len(h.poster.Calls(true)) == 3 })
	if diff := cmp.Diff([]string{"post:b1", "post:b2", "post:b3"}, texts(h.poster.Calls(true))); diff != "" {
		t.Errorf("while task A's first post hangs (-want +got):\n%s", diff)
	}
	close(release)
	eventually(t, "task A's posts", func() bool { return len(h.poster.Calls(true)) == 5 })
	got := texts(h.poster.Calls(true))
	if diff := cmp.Diff([]string{"post:a1", "post:a2"}, got[3:]); diff != "" {
		t.Errorf("task A, released (-want +got):\n%s", diff)
	}
	if h.poster.Overlapped() {
		t.Error("two deliveries of one thread overlapped (a message delivered twice?)")
	}
}

func TestLongPost(t *testing.T) {
	para := func(c byte) string { return strings.Repeat(string(c), 70) }
	paras := func(n int) string {
		var ps []string
		for i := range n {
			ps = append(ps, para('a'+byte(i)))
		}
		return strings.Join(ps, "\n\n")
	}
	limits := chat.Limits{Post: 100, MaxParts: 4}

	t.Run("parts", func(t *testing.T) {
		h := newHarness(t, limits, outbox.Config{}, nil)
		id := h.post(t, h.task(t, "C1"), paras(3))
		h.flush(t)
		calls := h.poster.Calls(false)
		if diff := cmp.Diff([]string{"post:" + para('a'), "post:" + para('b'), "post:" + para('c')}, texts(calls)); diff != "" {
			t.Errorf("posts (-want +got):\n%s", diff)
		}
		m := h.msg(t, id)
		if m.State != core.OutboxSent || m.PlatformMsgID != "P1" {
			t.Errorf("message %s with id %q, want sent with the first part's id P1", m.State, m.PlatformMsgID)
		}
	})

	t.Run("too many parts: a file", func(t *testing.T) {
		h := newHarness(t, limits, outbox.Config{}, nil)
		text := paras(5)
		id := h.post(t, h.task(t, "C1"), text)
		h.flush(t)
		calls := h.poster.Calls(false)
		if len(calls) != 1 || calls[0].Op != "upload" {
			t.Fatalf("calls %v, want one upload", texts(calls))
		}
		c := calls[0]
		if c.Name != "answer.md" || c.Content != text || c.Text == "" || strings.Contains(c.Text, "\n") {
			t.Errorf("upload %q with comment %q and %d bytes, want answer.md, a one-line comment and the whole text", c.Name, c.Text, len(c.Content))
		}
		if m := h.msg(t, id); m.State != core.OutboxSent || m.PlatformMsgID != "F1" {
			t.Errorf("message %s with id %q, want sent as F1", m.State, m.PlatformMsgID)
		}
	})

	t.Run("a failed part is retried without posting the earlier ones again", func(t *testing.T) {
		h := newHarness(t, limits, outbox.Config{}, failTimes(para('b'), 1, errors.New("timeout")))
		id := h.post(t, h.task(t, "C1"), paras(3))
		h.rounds(t, 3, time.Second)
		want := []string{"post:" + para('a'), "post:" + para('b'), "post:" + para('b'), "post:" + para('c')}
		if diff := cmp.Diff(want, texts(h.poster.Calls(false))); diff != "" {
			t.Errorf("calls (-want +got):\n%s", diff)
		}
		if m := h.msg(t, id); m.State != core.OutboxSent || m.PlatformMsgID != "P1" {
			t.Errorf("message %s with id %q, want sent with the first part's id P1", m.State, m.PlatformMsgID)
		}
	})

	t.Run("a splitter's oversized part is cut", func(t *testing.T) {
		whole := func(text string, limit int) []string { return []string{text} }
		h := newHarness(t, limits, outbox.Config{Split: whole}, nil)
		h.post(t, h.task(t, "C1"), paras(2))
		h.flush(t)
		for _, c := range h.poster.Calls(false) {
			if n := utf8.RuneCountInString(c.Text); n > limits.Post {
				t.Errorf("posted %d characters, limit %d", n, limits.Post)
			}
		}
	})
}

func TestStatusMessage(t *testing.T) {
	h := newHarness(t, chat.Limits{Post: 100, Update: 10}, outbox.Config{}, nil)
	task, otherTask := h.task(t, "C1"), h.task(t, "C2")
	job, other := h.job(t, task), h.job(t, otherTask)
	var ids []int64
	for _, text := range []string{"s1", "s2", "ééééééé"} { // 14 bytes
		ids = append(ids, h.add(t, task, job.ID, core.OutboxUpdate, chat.Payload{Text: text}))
	}
	otherID := h.add(t, otherTask, other.ID, core.OutboxUpdate, chat.Payload{Text: "o1"})
	h.rounds(t, 4, 0)

	statusID := h.msg(t, ids[0]).PlatformMsgID
	var got []call
	for _, c := range h.poster.Calls(false) {
		if c.Thread == task.Thread.Thread {
			got = append(got, call{Op: c.Op, MsgID: c.MsgID, Text: c.Text})
		}
	}
	want := []call{
		{Op: "post", Text: "s1"},
		{Op: "update", MsgID: statusID, Text: "s2"},
		{Op: "update", MsgID: statusID, Text: "ééé…"}, // cut to 10 bytes on a rune boundary
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("status calls (-want +got):\n%s", diff)
	}
	for _, id := range ids {
		if m := h.msg(t, id); m.State != core.OutboxSent || m.PlatformMsgID != statusID || statusID == "" {
			t.Errorf("update %d: %s with id %q, want sent with the status message's id %q", id, m.State, m.PlatformMsgID, statusID)
		}
	}
	if o := h.msg(t, otherID); o.State != core.OutboxSent || o.PlatformMsgID == statusID {
		t.Errorf("another job's status: %s with id %q, want its own message", o.State, o.PlatformMsgID)
	}
}

func TestReact(t *testing.T) {
	h := newHarness(t, slackLimits, outbox.Config{}, nil)
	task := h.task(t, "C1")
	h.add(t, task, 0, core.OutboxReact, chat.Payload{Emoji: chat.EmojiClaimed})
	h.add(t, task, 0, core.OutboxReact, chat.Payload{Emoji: chat.EmojiDone, MsgID: "1700.99"})
	h.add(t, task, 0, core.OutboxUnreact, chat.Payload{Emoji: chat.EmojiClaimed})
	h.rounds(t, 3, 0)

	var got []call
	for _, c := range h.poster.Calls(false) {
		got = append(got, call{Op: c.Op, MsgID: c.MsgID, Emoji: c.Emoji, Remove: c.Remove})
	}
	want := []call{
		{Op: "react", MsgID: task.Thread.Thread, Emoji: "eyes"},
		{Op: "react", MsgID: "1700.99", Emoji: "white_check_mark"},
		{Op: "react", MsgID: task.Thread.Thread, Emoji: "eyes", Remove: true},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("reactions (-want +got):\n%s", diff)
	}
}

func TestUpload(t *testing.T) {
	h := newHarness(t, slackLimits, outbox.Config{}, nil)
	task := h.task(t, "C1")
	ws := task.Workspace
	outside := filepath.Join(t.TempDir(), "secret.txt")
	for path, content := range map[string]string{
		filepath.Join(ws, "out", "report.csv"): "a,b\n1,2\n",
		outside:                                "secret",
	} {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(outside, filepath.Join(ws, "link.txt")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(ws, "out", "pipe"), 0o644); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name  string
		p     chat.Payload
		state core.OutboxState
		want  []call
	}{
		{"a workspace file", chat.Payload{Path: filepath.Join(ws, "out", "report.csv"), Text: "the report"}, core.OutboxSent,
			[]call{{Op: "upload", Name: "report.csv", Content: "a,b\n1,2\n", Text: "the report"}}},
		{"named", chat.Payload{Path: filepath.Join(ws, "out", "report.csv"), Name: "r.csv"}, core.OutboxSent,
			[]call{{Op: "upload", Name: "r.csv", Content: "a,b\n1,2\n"}}},
		{"missing", chat.Payload{Path: filepath.Join(ws, "nope.txt")}, core.OutboxFailed, nil},
		{"relative", chat.Payload{Path: "out/report.csv"}, core.OutboxFailed, nil},
		{"outside the workspace", chat.Payload{Path: outside}, core.OutboxFailed, nil},
		{"dot-dot", chat.Payload{Path: ws + "/../../" + outside}, core.OutboxFailed, nil},
		{"a symlink out", chat.Payload{Path: filepath.Join(ws, "link.txt")}, core.OutboxFailed, nil},
		{"a directory", chat.Payload{Path: filepath.Join(ws, "out")}, core.OutboxFailed, nil},
		{"a named pipe", chat.Payload{Path: filepath.Join(ws, "out", "pipe")}, core.OutboxFailed, nil}, // refused, not waited on
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(h.poster.Calls(false))
			id := h.add(t, task, 0, core.OutboxUpload, tt.p)
			h.flush(t)
			var got []call
			for _, c := range h.poster.Calls(false)[before:] {
				got = append(got, call{Op: c.Op, Name: c.Name, Content: c.Content, Text: c.Text})
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("calls (-want +got):\n%s", diff)
			}
			if state, tries := h.state(t, id); state != tt.state || tries > 1 {
				t.Errorf("message %s after %d tries, want %s at once", state, tries, tt.state)
			}
		})
	}
}

// TestUploadOverTheCap: a file over files.max_bytes when it is delivered
// (it grew after the upload was written) is not uploaded; the thread gets a
// note naming it, its size and the limit, in the configured locale. A file
// at the limit is uploaded.
func TestUploadOverTheCap(t *testing.T) {
	for _, tt := range []struct {
		locale, note string
	}{
		{"", "output/big.bin (2.0 MB) is over the 1.0 MB upload limit and was not sent; it stays in the task's workspace."},
		{"ja", "output/big.bin（2.0 MB）はアップロードの上限 1.0 MB を超えるため送りませんでした。タスクのワークスペースに残っています。"},
	} {
		t.Run("locale "+tt.locale, func(t *testing.T) {
			const limit = 1_000_000
			h := newHarness(t, slackLimits, outbox.Config{MaxFileBytes: limit, Locale: tt.locale}, nil)
			task := h.task(t, "C1")
			out := filepath.Join(task.Workspace, "output")
			if err := os.MkdirAll(out, 0o755); err != nil {
				t.Fatal(err)
			}
			big, small := filepath.Join(out, "big.bin"), filepath.Join(out, "small.txt")
			if err := os.WriteFile(small, []byte(strings.Repeat("s", limit)), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(big, []byte("small when the upload was written"), 0o644); err != nil {
				t.Fatal(err)
			}
			bigID := h.add(t, task, 0, core.OutboxUpload, chat.Payload{Path: big, Name: "big.bin", Text: "output/big.bin"})
			smallID := h.add(t, task, 0, core.OutboxUpload, chat.Payload{Path: small, Name: "small.txt", Text: "output/small.txt"})
			if err := os.WriteFile(big, make([]byte, 2*limit), 0o644); err != nil { // it grew
				t.Fatal(err)
			}
			h.flush(t)
			h.flush(t)
			var got []call
			for _, c := range h.poster.Calls(false) {
				got = append(got, call{Op: c.Op, Name: c.Name, Text: c.Text, Content: fmt.Sprint(len(c.Content))})
			}
			want := []call{
				{Op: "post", Text: tt.note, Content: "0"},
				{Op: "upload", Name: "small.txt", Text: "output/small.txt", Content: fmt.Sprint(limit)},
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("calls (-want +got):\n%s", diff)
			}
			for _, id := range []int64{bigID, smallID} {
				if state, tries := h.state(t, id); state != core.OutboxSent || tries > 0 {
					t.Errorf("message %d %s after %d tries, want sent at once", id, state, tries)
				}
			}
		})
	}
}

// TestUploadNamesNeutralised: the name an upload shows on the platform and
// its comment are neutralised as message text is, and kept on one line,
// without right-to-left overrides, whatever the file is called on disk.
func TestUploadNamesNeutralised(t *testing.T) {
	const z = "\u200b"
	h := newHarness(t, slackLimits, outbox.Config{}, nil)
	task := h.task(t, "C1")
	out := filepath.Join(task.Workspace, "output")
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		file, wantName, wantText string
	}{
		{"@everyone.txt", "@" + z + "everyone.txt", "output/@" + z + "everyone.txt"},
		{"<!channel>.md", "@" + z + "channel.md", "output/@" + z + "channel.md"},
		{"<!here|x> <!subteam^S1>.md", "@" + z + "x @" + z + "S1.md", "output/@" + z + "x @" + z + "S1.md"},
		{"invoice\u202efdp.exe", "invoicefdp.exe", "output/invoicefdp.exe"},
		{"report.md\n\n<!channel> urgent.md", "report.md  @" + z + "channel urgent.md", "output/report.md  @" + z + "channel urgent.md"},
		{"\x1b[31mred\r.txt", "[31mred .txt", "output/ [31mred .txt"},
		{"\u202e\n", "file", "output/"},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			path := filepath.Join(out, tt.file)
			if err := os.WriteFile(path, []byte("data"), 0o644); err != nil {
				t.Fatal(err)
			}
			before := len(h.poster.Calls(false))
			id := h.add(t, task, 0, core.OutboxUpload, chat.Payload{Path: path, Name: tt.file, Text: "output/" + tt.file})
			h.flush(t)
			var got []call
			for _, c := range h.poster.Calls(false)[before:] {
				got = append(got, call{Op: c.Op, Name: c.Name, Text: c.Text, Content: c.Content})
			}
			want := []call{{Op: "upload", Name: tt.wantName, Text: tt.wantText, Content: "data"}}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("calls (-want +got):\n%s", diff)
			}
			if state, _ := h.state(t, id); state != core.OutboxSent {
				t.Errorf("message %s, want sent", state)
			}
		})
	}
}

func TestRateLimited(t *testing.T) {
	h := newHarness(t, slackLimits, outbox.Config{MaxTries: 1}, failTimes("hello", 1,
		&chat.RateLimitedError{After: 30 * time.Second, Err: errors.New("ratelimited")}))
	task := h.task(t, "C1")
	id := h.post(t, task, "hello")

	h.flush(t)
	if state, tries := h.state(t, id); state != core.OutboxPending || tries != 1 {
		t.Fatalf("after a 429: %s after %d tries, want pending (a 429 never gives up, even with MaxTries 1)", state, tries)
	}
	h.clock.Advance(29 * time.Second)
	if n := h.flush(t); n != 0 {
		t.Errorf("%d deliveries started 29 s into a 30 s rate limit", n)
	}
	h.clock.Advance(time.Second)
	h.flush(t)
	calls := h.poster.Calls(false)
	if len(calls) != 2 || calls[1].Err {
		t.Fatalf("calls %+v, want a failed post and a good one", calls)
	}
	if wait := calls[1].At.Sub(calls[0].At); wait < 30*time.Second {
		t.Errorf("retried %s after the 429, want at least 30s", wait)
	}
	if state, _ := h.state(t, id); state != core.OutboxSent {
		t.Errorf("message %s, want sent", state)
	}
}

func TestFailures(t *testing.T) {
	tests := []struct {
		name      string
		err       error
		failures  int // calls that fail
		rounds    int
		state     core.OutboxState
		tries     int
		lastError string
	}{
		{"permanent fails at once", fmt.Errorf("channel_not_found: %w", chat.ErrPermanent), 1, 3, core.OutboxFailed, 1, "channel_not_found"},
		{"transient retried, then sent", errors.New("502 bad gateway"), 1, 3, core.OutboxSent, 1, ""},
		{"transient until MaxTries", errors.New("502 bad gateway"), 100, 6, core.OutboxFailed, 3, "502 bad gateway"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, slackLimits, outbox.Config{MaxTries: 3}, failTimes("hello", tt.failures, tt.err))
			task := h.task(t, "C1")
			job := h.job(t, task)
			id := h.add(t, task, job.ID, core.OutboxPost, chat.Payload{Text: "hello"})
			next := h.post(t, task, "next")
			h.rounds(t, tt.rounds, time.Second)

			m := h.msg(t, id)
			if m.State != tt.state || m.Tries != tt.tries || !strings.Contains(m.LastError, tt.lastError) {
				t.Errorf("message %s after %d tries (%q), want %s after %d (%q)", m.State, m.Tries, m.LastError, tt.state, tt.tries, tt.lastError)
			}
			if state, _ := h.state(t, next); state != core.OutboxSent {
				t.Errorf("the task's next message is %s, want sent once the first settled", state)
			}
			hello := 0
			for _, c := range h.poster.Calls(false) {
				if c.Text == "hello" {
					hello++
				}
			}
			if want := min(tt.failures+1, tt.tries+boolInt(tt.state == core.OutboxSent)); hello != want {
				t.Errorf("%d tries at the platform, want %d", hello, want)
			}
			got, err := h.store.Job(t.Context(), job.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got.State != core.JobQueued || got.Error != "" {
				t.Errorf("job %s (%q) after a delivery failure, want queued as it was", got.State, got.Error)
			}
		})
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func TestEveryPerChannel(t *testing.T) {
	const every = 40 * time.Millisecond
	h := newHarness(t, chat.Limits{Post: 100, Every: every}, outbox.Config{Now: time.Now}, nil)
	for _, ch := range []string{"C1", "C1", "C1", "C2"} {
		task := h.task(t, ch)
		h.post(t, task, ch+" one")
		h.post(t, task, ch+" two")
	}
	h.rounds(t, 4, 0)

	calls := h.poster.Calls(true)
	if len(calls) != 8 {
		t.Fatalf("%d posts, want 8", len(calls))
	}
	byChannel := map[string][]time.Time{}
	for _, c := range calls {
		byChannel[c.Channel] = append(byChannel[c.Channel], c.At)
	}
	for ch, at := range byChannel {
		slices.SortFunc(at, func(a, b time.Time) int { return a.Compare(b) })
		for i := 1; i < len(at); i++ {
			if gap := at[i].Sub(at[i-1]); gap < every {
				t.Errorf("channel %s: posts %d and %d %s apart, want at least %s", ch, i-1, i, gap, every)
			}
		}
	}
}

// signalStore tells when the deliverer has read the outbox.
type signalStore struct {
	outbox.Store
	reads chan struct{}
}

func (s signalStore) ClaimOutbox(ctx context.Context, p core.Platform, owner string, now time.Time, lease time.Duration, limit int, after int64) ([]core.OutboxMessage, error) {
	msgs, err := s.Store.ClaimOutbox(ctx, p, owner, now, lease, limit, after)
	select {
	case s.reads <- struct{}{}:
	default:
	}
	return msgs, err
}

func TestKickAndShutdown(t *testing.T) {
	h := newHarness(t, slackLimits, outbox.Config{}, nil)
	s := signalStore{Store: h.store, reads: make(chan struct{}, 1)}
	d := outbox.New(s, core.PlatformSlack, h.poster, outbox.Config{Poll: time.Hour, Now: h.clock.Now})

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	<-s.reads // the first read, at start, found nothing

	h.post(t, h.task(t, "C1"), "kicked")
	d.Kick()
	d.Kick() // kicks coalesce and never block
	eventually(t, "the kicked post", func() bool { return len(h.poster.Calls(true)) == 1 })

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run: %v, want nil after its context ended", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
}

func TestBackoff(t *testing.T) {
	for _, tt := range []struct {
		try      int
		min, max time.Duration
	}{
		{0, 500 * time.Millisecond, time.Second},
		{1, 500 * time.Millisecond, time.Second},
		{2, time.Second, 2 * time.Second},
		{4, 4 * time.Second, 8 * time.Second},
		{9, 128 * time.Second, 256 * time.Second},
		{10, 150 * time.Second, 5 * time.Minute},
		{50, 150 * time.Second, 5 * time.Minute},
	} {
		t.Run(fmt.Sprint(tt.try), func(t *testing.T) {
			for range 100 {
				if d := outbox.Backoff(tt.try); d < tt.min || d > tt.max {
					t.Fatalf("Backoff(%d) = %s, want in [%s, %s]", tt.try, d, tt.min, tt.max)
				}
			}
		})
	}
}

func TestPacedChannelDoesNotStarveOthers(t *testing.T) {
	// Every is so long that the second post in C1 waits for the rest of
	// the test; the deliveries waiting for it must not take every slot.
	h := newHarness(t, chat.Limits{Post: 100, Every: time.Hour}, outbox.Config{Poll: 5 * time.Millisecond, Concurrency: 8, Now: time.Now}, nil)
	for i := range 12 {
		h.post(t, h.task(t, "C1"), fmt.Sprintf("busy %d", i))
	}
	h.post(t, h.task(t, "C2"), "elsewhere")

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- h.d.Run(ctx) }()
	eventually(t, "the post in the other channel", func() bool {
		return slices.ContainsFunc(h.poster.Calls(true), func(c call) bool { return c.Channel == "C2" })
	})
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
	if n := len(h.poster.Calls(true)); n != 2 {
		t.Errorf("%d posts, want 2: one per channel while C1 waits for its turn", n)
	}
}

// filePoster is a poster on the machine of the workspaces: files are named
// by their path (chat.FilePoster).
type filePoster struct{ *poster }

func (p filePoster) PostFile(ctx context.Context, thread core.ThreadRef, path string, size int64, comment string) (string, error) {
	return p.do(call{Op: "file", Channel: thread.Channel, Thread: thread.Thread, Name: path, Content: fmt.Sprint(size), Text: comment}, "F")
}

// TestPostFile: a chat.FilePoster is handed a workspace file's path and
// size in place of its content; a file outside the workspace is refused
// as for Upload.
func TestPostFile(t *testing.T) {
	h := newHarness(t, slackLimits, outbox.Config{}, nil)
	fp := filePoster{h.poster}
	h.d = outbox.New(h.store, core.PlatformSlack, fp, outbox.Config{Now: h.clock.Now, Backoff: func(int) time.Duration { return time.Second }})
	task := h.task(t, "C1")
	report := filepath.Join(task.Workspace, "output", "report.csv")
	if err := os.MkdirAll(filepath.Dir(report), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(report, []byte("a,b\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ok := h.add(t, task, 0, core.OutboxUpload, chat.Payload{Path: report, Name: "report.csv", Text: "output/report.csv"})
	outside := h.add(t, task, 0, core.OutboxUpload, chat.Payload{Path: filepath.Join(t.TempDir(), "x"), Name: "x"})
	h.flush(t)
	h.flush(t)
	var got []call
	for _, c := range h.poster.Calls(false) {
		got = append(got, call{Op: c.Op, Name: c.Name, Content: c.Content, Text: c.Text})
	}
	if diff := cmp.Diff([]call{{Op: "file", Name: report, Content: "4", Text: "output/report.csv"}}, got); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
	if state, _ := h.state(t, ok); state != core.OutboxSent {
		t.Errorf("the file's message is %s, want sent", state)
	}
	if state, _ := h.state(t, outside); state != core.OutboxFailed {
		t.Errorf("the message of a file outside the workspace is %s, want failed", state)
	}
}

// countStore counts the deliverer's claims.
type countStore struct {
	outbox.Store
	claims *atomic.Int64
}

func (s countStore) ClaimOutbox(ctx context.Context, p core.Platform, owner string, now time.Time, lease time.Duration, limit int, after int64) ([]core.OutboxMessage, error) {
	s.claims.Add(1)
	return s.Store.ClaimOutbox(ctx, p, owner, now, lease, limit, after)
}

// TestPacedBacklogNotClaimedPerKick: while every due message waits for a
// paced channel's turn, a message added there (a kick) does not make the
// deliverer claim and hand back the whole backlog again — only the poll
// and a settled delivery do — and a message of another channel still goes
// out at the next poll.
func TestPacedBacklogNotClaimedPerKick(t *testing.T) {
	const poll = 200 * time.Millisecond
	h := newHarness(t, chat.Limits{Post: 100, Every: time.Hour}, outbox.Config{Concurrency: 8, Now: time.Now}, nil)
	var claims atomic.Int64
	d := outbox.New(countStore{Store: h.store, claims: &claims}, core.PlatformSlack, h.poster,
		outbox.Config{Poll: poll, Concurrency: 8, Now: time.Now})
	for i := range 20 {
		h.post(t, h.task(t, "C1"), fmt.Sprintf("busy %d", i))
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	eventually(t, "the first post in C1", func() bool { return len(h.poster.Calls(true)) == 1 })

	before := claims.Load()
	const kicks = 100
	start := time.Now()
	for i := range kicks {
		h.post(t, h.task(t, "C1"), fmt.Sprintf("more %d", i))
		d.Kick()
		time.Sleep(10 * time.Millisecond)
	}
	n := claims.Load() - before
	polls := int64(time.Since(start)/poll) + 2
	if n > polls {
		t.Errorf("%d claims over %d kicks in %s, want at most %d (one a poll): the backlog was claimed again for kicks", n, kicks, time.Since(start).Round(time.Millisecond), polls)
	}

	h.post(t, h.task(t, "C2"), "elsewhere")
	d.Kick()
	eventually(t, "the post in the other channel", func() bool {
		return slices.ContainsFunc(h.poster.Calls(true), func(c call) bool { return c.Channel == "C2" })
	})
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
}
