package console

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/chat"
)

// Service is what the console needs of the conversation service
// (*chat.Service).
type Service interface {
	HandleMessage(ctx context.Context, m chat.Message) (chat.Reply, error)
	// HandleAction runs the button an answer at the approval prompt
	// stands for; rights and one decision per wait are the service's.
	HandleAction(ctx context.Context, a chat.Action) (chat.Reply, error)
}

// localChannel is the platform-qualified channel of the console's
// messages and answers.
const localChannel = "console:local"

// AnswerPrompt asks for the answer to an approval: the console shows it
// under the approval's preview, and `baton run` on a terminal as well.
const AnswerPrompt = "[y]es / [n]o / [a]lways? "

// ParseAnswer reads a person's answer to AnswerPrompt: y or yes approves
// the call, n or no denies it, a or always approves it and always allows
// it from then on. Case and surrounding space do not matter; anything
// else is no answer.
func ParseAnswer(line string) (core.Verdict, bool) {
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return core.VerdictApprove, true
	case "n", "no":
		return core.VerdictDeny, true
	case "a", "always":
		return core.VerdictAlways, true
	}
	return "", false
}

// ask is an approval waiting for an answer at the prompt: the message that
// showed it and the actions of its buttons, by verdict.
type ask struct {
	msgID   string
	thread  core.ThreadRef
	actions map[core.Verdict]string
}

// askOf returns the ask of a message whose buttons decide an approval
// ("approve:J.S", "deny:J.S", "always:J.S"); other buttons (Stop, Retry)
// ask nothing: Ctrl-C and `!retry` do their work on a terminal.
func askOf(thread core.ThreadRef, msgID string, buttons []chat.Button) (ask, bool) {
	a := ask{msgID: msgID, thread: thread, actions: map[core.Verdict]string{}}
	for _, b := range buttons {
		verb, _, _ := strings.Cut(b.Action, ":")
		if v, ok := core.ParseVerdict(verb); ok && string(v) == verb {
			a.actions[v] = b.Action
		}
	}
	return a, len(a.actions) > 0
}

// Console is one person's terminal conversation with Baton. It reads lines
// from In and prints Baton's posts and progress to Out; it is the Poster of
// the console platform for the outbox deliverer, a ButtonPoster so that an
// approval is asked inline: its preview, then AnswerPrompt, answered by the
// next line the person types.
//
// One reader takes every line typed: while an approval waits, an answer
// (ParseAnswer) decides it; a `!` command or `/new`, `/quit` does what it
// always does; any other line is an ordinary message in the thread, as
// without the prompt, and the prompt is shown again. Several approvals are
// asked one after the other, oldest first.
type Console struct {
	svc    Service
	in     io.Reader
	out    io.Writer
	author chat.Author
	now    func() time.Time

	mu     sync.Mutex // guards out, status, asks and ids
	status map[string]string
	asks   []ask // approvals waiting for an answer, oldest first
	ids    int64 // messages posted, for their ids

	thread core.ThreadRef // the current thread; changed by /new (read loop only)
	seq    int
}

var (
	_ chat.Poster       = (*Console)(nil)
	_ chat.ButtonPoster = (*Console)(nil)
)

// New returns a console for user (e.g. "alice") reading in and writing out.
func New(svc Service, in io.Reader, out io.Writer, user string) *Console {
	c := &Console{
		svc: svc, in: in, out: out, now: time.Now, status: map[string]string{},
		author: chat.Author{ID: "console:" + user, Name: user},
	}
	c.newThread()
	return c
}

// newThread starts a fresh conversation.
func (c *Console) newThread() {
	c.thread = core.ThreadRef{Platform: core.PlatformConsole, Channel: "chat", Thread: strconv.FormatInt(c.now().UnixNano(), 10)}
}

// Run reads lines until /quit, the end of input or ctx ends. Each line is a
// message in the current thread; /new starts another thread.
func (c *Console) Run(ctx context.Context) error {
	c.printf("Baton — type a request; /new starts a new thread, /quit leaves. !help lists the commands.\n")
	lines := make(chan string)
	errc := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(c.in)
		sc.Buffer(make([]byte, 64*1024), 1<<20)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-ctx.Done():
				return
			}
		}
		errc <- sc.Err()
	}()
	for {
		c.prompt()
		select {
		case <-ctx.Done():
			return nil
		case err := <-errc:
			return err
		case line := <-lines:
			line = strings.TrimSpace(line)
			if a, ok := c.asking(); ok && line != "" {
				if v, ok := ParseAnswer(line); ok {
					if err := c.answer(ctx, a, v); errors.Is(err, context.Canceled) {
						return nil
					}
					continue
				}
				if !strings.HasPrefix(line, "!") && !strings.HasPrefix(line, "/") {
					c.printf("(sent as a message; the approval still waits for y, n or a)\n")
				}
			}
			switch line {
			case "":
				continue
			case "/quit", "/exit":
				return nil
			case "/new":
				c.newThread()
				c.printf("(a new thread)\n")
				continue
			}
			c.seq++
			r, err := c.svc.HandleMessage(ctx, chat.Message{
				Thread: c.thread, Channel: localChannel, MsgID: strconv.Itoa(c.seq), Author: c.author,
				Text: line, Addressed: true, At: c.now(),
			})
			if err != nil {
				if errors.Is(err, context.Canceled) {
					return nil
				}
				c.printf("baton: %v\n", err)
				continue
			}
			if r.Text != "" {
				c.printf("%s\n", r.Text)
			}
		}
	}
}

// prompt asks for the next line: the answer to the oldest approval that
// waits, else a message.
func (c *Console) prompt() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.promptLocked()
}

func (c *Console) promptLocked() {
	if len(c.asks) > 0 {
		fmt.Fprint(c.out, c.asks[0].prompt())
		return
	}
	fmt.Fprint(c.out, "> ")
}

// prompt is AnswerPrompt with the answers a's buttons offer.
func (a ask) prompt() string {
	if len(a.actions) == 3 {
		return AnswerPrompt
	}
	var opts []string
	for _, o := range []struct {
		v     core.Verdict
		label string
	}{{core.VerdictApprove, "[y]es"}, {core.VerdictDeny, "[n]o"}, {core.VerdictAlways, "[a]lways"}} {
		if _, ok := a.actions[o.v]; ok {
			opts = append(opts, o.label)
		}
	}
	return strings.Join(opts, " / ") + "? "
}

// asking returns the approval the prompt asks about, if any.
func (c *Console) asking() (ask, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.asks) == 0 {
		return ask{}, false
	}
	return c.asks[0], true
}

// answer hands v on a to the service as the click of its button. The
// approval leaves the prompt whatever the service says: the message's edit
// shows the decision, and a refusal is printed.
func (c *Console) answer(ctx context.Context, a ask, v core.Verdict) error {
	action, ok := a.actions[v]
	if !ok {
		c.printf("(that answer is not offered here)\n")
		return nil
	}
	c.drop(a.msgID)
	r, err := c.svc.HandleAction(ctx, chat.Action{Value: action, Thread: a.thread, Channel: localChannel, MsgID: a.msgID, Author: c.author})
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return err
		}
		c.printf("baton: %v\n", err)
		return nil
	}
	if r.Text != "" {
		c.printf("%s\n", r.Text)
	}
	return nil
}

// drop removes the ask of message msgID from the prompt.
func (c *Console) drop(msgID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dropLocked(msgID)
}

func (c *Console) dropLocked(msgID string) {
	c.asks = slices.DeleteFunc(c.asks, func(a ask) bool { return a.msgID == msgID })
}

// reaskLocked shows the approval prompt again after a print, so that it
// stays the last line while an approval waits.
func (c *Console) reaskLocked() {
	if len(c.asks) > 0 {
		fmt.Fprint(c.out, c.asks[0].prompt())
	}
}

func (c *Console) printf(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	fmt.Fprintf(c.out, format, args...)
}

// Post implements chat.Poster: Baton's messages are printed.
func (c *Console) Post(ctx context.Context, thread core.ThreadRef, text string) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	fmt.Fprintf(c.out, "\nbaton: %s\n", strings.TrimSpace(text))
	c.reaskLocked()
	return c.idLocked(), nil
}

// Update implements chat.Poster: a changed status line is printed.
func (c *Console) Update(ctx context.Context, thread core.ThreadRef, msgID, text string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.updateLocked(msgID, text)
	return nil
}

func (c *Console) updateLocked(msgID, text string) {
	if c.status[msgID] == text {
		return
	}
	c.status[msgID] = text
	fmt.Fprintf(c.out, "\n  %s\n", strings.TrimSpace(text))
	c.reaskLocked()
}

// PostButtons implements chat.ButtonPoster: the text is printed as a post;
// buttons that decide an approval put it on the prompt, behind those asked
// before it.
func (c *Console) PostButtons(ctx context.Context, thread core.ThreadRef, text string, buttons []chat.Button) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	id := c.idLocked()
	c.status[id] = text
	fmt.Fprintf(c.out, "\nbaton: %s\n", strings.TrimSpace(text))
	if a, ok := askOf(thread, id, buttons); ok {
		c.asks = append(c.asks, a)
	}
	c.reaskLocked()
	return id, nil
}

// UpdateButtons implements chat.ButtonPoster: a changed text is printed as
// Update prints it. An approval's message updated without its buttons was
// decided (here, elsewhere or by the timeout): it leaves the prompt.
func (c *Console) UpdateButtons(ctx context.Context, thread core.ThreadRef, msgID, text string, buttons []chat.Button) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := askOf(thread, msgID, buttons); !ok {
		c.dropLocked(msgID)
	}
	c.updateLocked(msgID, text)
	return nil
}

// React implements chat.Poster: reactions mean nothing on a terminal.
func (c *Console) React(ctx context.Context, thread core.ThreadRef, msgID, emoji string, remove bool) error {
	return nil
}

// Upload implements chat.Poster: a file the job produced is named.
func (c *Console) Upload(ctx context.Context, thread core.ThreadRef, name string, r io.Reader, size int64, comment string) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	fmt.Fprintf(c.out, "\nbaton: file %s (%d bytes)\n", comment, size)
	c.reaskLocked()
	return c.idLocked(), nil
}

// Limits implements chat.Poster.
func (c *Console) Limits() chat.Limits {
	return chat.Limits{Post: 1 << 20, MaxParts: 1}
}

// idLocked returns a new message id: the time and a count, so that two
// messages of one instant differ (the prompt and the status lines are
// keyed by it).
func (c *Console) idLocked() string {
	c.ids++
	return strconv.FormatInt(c.now().UnixNano(), 10) + "-" + strconv.FormatInt(c.ids, 10)
}
