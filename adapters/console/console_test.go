package console_test

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-bot/baton/adapters/console"
	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/chat"
)

// service records what the console hands the conversation service.
type service struct {
	mu       sync.Mutex
	messages []string      // texts, in order
	actions  []chat.Action // in order
	reply    chat.Reply    // HandleAction's answer
	// messageReply is HandleMessage's answer.
	messageReply chat.Reply
}

func (s *service) HandleMessage(ctx context.Context, m chat.Message) (chat.Reply, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.messages = append(s.messages, m.Text)
	return s.messageReply, nil
}

func (s *service) HandleAction(ctx context.Context, a chat.Action) (chat.Reply, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.actions = append(s.actions, a)
	return s.reply, nil
}

func (s *service) values() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, a := range s.actions {
		out = append(out, a.Value)
	}
	return out
}

var thread = core.ThreadRef{Platform: core.PlatformConsole, Channel: "chat", Thread: "1"}

// approvalButtons are the buttons of the approval of job 7's first wait,
// as the conversation service makes them.
func approvalButtons(key string) []chat.Button {
	return []chat.Button{
		{Action: "approve:" + key, Label: "Approve", Style: chat.StylePrimary},
		{Action: "deny:" + key, Label: "Deny", Style: chat.StyleDanger},
		{Action: "always:" + key, Label: "Always allow"},
	}
}

// session runs a console on input after the posts of setup, until the
// input ends, and returns what it printed.
func session(t *testing.T, svc *service, input string, setup func(c *console.Console)) string {
	t.Helper()
	var out bytes.Buffer
	c := console.New(svc, strings.NewReader(input), &out, "alice", console.Options{})
	if setup != nil {
		setup(c)
	}
	if err := c.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

func postApproval(t *testing.T, c *console.Console, key string) string {
	t.Helper()
	id, err := c.PostButtons(context.Background(), thread, "Approval needed before Bash runs:\n```\ntouch x\n```", approvalButtons(key))
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func TestApprovalPrompt(t *testing.T) {
	for _, tc := range []struct {
		name, input  string
		wantActions  []string
		wantMessages []string
		// prompts is how often AnswerPrompt is shown: once with the
		// approval, once as the session starts, once after every line
		// that is no answer.
		prompts int
	}{
		{"yes", "y\n", []string{"approve:7.1"}, nil, 2},
		{"no", "n\n", []string{"deny:7.1"}, nil, 2},
		{"always", "a\n", []string{"always:7.1"}, nil, 2},
		{"words and case", " Yes \n", []string{"approve:7.1"}, nil, 2},
		{"garbage then yes", "maybe later\ny\n", []string{"approve:7.1"}, []string{"maybe later"}, 3},
		{"a command then no", "!status\nn\n", []string{"deny:7.1"}, []string{"!status"}, 3},
		{"an empty line then always", "\nalways\n", []string{"always:7.1"}, nil, 3},
		{"after the answer a line is a message", "y\ny\n", []string{"approve:7.1"}, []string{"y"}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc := &service{}
			var id string
			out := session(t, svc, tc.input, func(c *console.Console) { id = postApproval(t, c, "7.1") })
			if diff := cmp.Diff(tc.wantActions, svc.values()); diff != "" {
				t.Errorf("actions (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantMessages, svc.messages); diff != "" {
				t.Errorf("messages (-want +got):\n%s", diff)
			}
			if n := strings.Count(out, console.AnswerPrompt); n != tc.prompts {
				t.Errorf("the prompt was shown %d times, want %d:\n%s", n, tc.prompts, out)
			}
			if !strings.HasSuffix(out, "> ") {
				t.Errorf("after the answer the prompt is not back to messages:\n%s", out)
			}
			if !strings.Contains(out, "touch x") {
				t.Errorf("the preview was not shown:\n%s", out)
			}
			for _, a := range svc.actions {
				want := chat.Action{Value: a.Value, Thread: thread, Channel: "console:local", MsgID: id, Author: chat.Author{ID: "console:alice", Name: "alice"}}
				if diff := cmp.Diff(want, a); diff != "" {
					t.Errorf("action (-want +got):\n%s", diff)
				}
			}
		})
	}
}

// TestApprovalPromptInTurn: two approvals are asked oldest first, one
// answer each.
func TestApprovalPromptInTurn(t *testing.T) {
	svc := &service{}
	session(t, svc, "n\ny\n", func(c *console.Console) {
		postApproval(t, c, "7.1")
		postApproval(t, c, "8.1")
	})
	if diff := cmp.Diff([]string{"deny:7.1", "approve:8.1"}, svc.values()); diff != "" {
		t.Errorf("actions (-want +got):\n%s", diff)
	}
}

// TestApprovalDecidedElsewhere: the approval's message edited without its
// buttons (decided by someone else, or by the timeout) leaves the prompt:
// the next line is a message.
func TestApprovalDecidedElsewhere(t *testing.T) {
	svc := &service{}
	out := session(t, svc, "y\n", func(c *console.Console) {
		id := postApproval(t, c, "7.1")
		if err := c.UpdateButtons(context.Background(), thread, id, "Bash denied: nobody decided within 1h0m0s.", nil); err != nil {
			t.Fatal(err)
		}
	})
	if len(svc.actions) != 0 || !cmp.Equal(svc.messages, []string{"y"}) {
		t.Errorf("actions %v, messages %q; want none and the line as a message", svc.values(), svc.messages)
	}
	if !strings.Contains(out, "nobody decided") {
		t.Errorf("the edit was not printed:\n%s", out)
	}
}

// TestStopButtonAsksNothing: a status message with a Stop button is printed
// without a prompt; Ctrl-C stops a job on a terminal.
func TestStopButtonAsksNothing(t *testing.T) {
	svc := &service{}
	out := session(t, svc, "y\n", func(c *console.Console) {
		if _, err := c.PostButtons(context.Background(), thread, "Working on it", []chat.Button{{Action: "stop:7", Label: "Stop"}}); err != nil {
			t.Fatal(err)
		}
	})
	if strings.Contains(out, console.AnswerPrompt) || len(svc.actions) != 0 || !cmp.Equal(svc.messages, []string{"y"}) {
		t.Errorf("actions %v, messages %q, output:\n%s", svc.values(), svc.messages, out)
	}
}

// TestApprovalRefused: what the service answers the person (a refusal,
// "already decided") is printed, and the prompt moves on.
func TestApprovalRefused(t *testing.T) {
	svc := &service{reply: chat.Reply{Text: "That approval was already decided (approved, by @bob); nothing changed."}}
	out := session(t, svc, "y\ny\n", func(c *console.Console) { postApproval(t, c, "7.1") })
	if !strings.Contains(out, "already decided") {
		t.Errorf("the reply was not printed:\n%s", out)
	}
	if !cmp.Equal(svc.values(), []string{"approve:7.1"}) || !cmp.Equal(svc.messages, []string{"y"}) {
		t.Errorf("actions %v, messages %q", svc.values(), svc.messages)
	}
}

func TestParseAnswer(t *testing.T) {
	for in, want := range map[string]core.Verdict{
		"y": core.VerdictApprove, "YES": core.VerdictApprove, "n": core.VerdictDeny, "no": core.VerdictDeny,
		"a": core.VerdictAlways, "Always": core.VerdictAlways, "": "", "ok": "", "yes please": "", "approve": "",
	} {
		got, ok := console.ParseAnswer(in)
		if got != want || ok != (want != "") {
			t.Errorf("ParseAnswer(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
}

// TestApprovalPromptStaysLast: what is printed while an approval waits
// (the status line, a post) is followed by the prompt again.
func TestApprovalPromptStaysLast(t *testing.T) {
	var out bytes.Buffer
	c := console.New(&service{}, strings.NewReader(""), &out, "alice", console.Options{})
	ctx := context.Background()
	status, err := c.PostButtons(ctx, thread, "Working on it", []chat.Button{{Action: "stop:7", Label: "Stop"}})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), console.AnswerPrompt) {
		t.Fatalf("a prompt before any approval:\n%s", out.String())
	}
	postApproval(t, c, "7.1")
	if err := c.UpdateButtons(ctx, thread, status, "Waiting for approval of Bash.", []chat.Button{{Action: "stop:7", Label: "Stop"}}); err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(out.String(), "Waiting for approval of Bash.\n"+console.AnswerPrompt) {
		t.Errorf("the prompt is not the last line:\n%s", out.String())
	}
	if _, err := c.Post(ctx, thread, "a note"); err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(out.String(), "a note\n"+console.AnswerPrompt) {
		t.Errorf("the prompt is not the last line:\n%s", out.String())
	}
}
