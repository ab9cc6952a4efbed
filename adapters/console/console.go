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
	"github.com/baton-bot/baton/core/engine"
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

// Options configure a Console. The zero value prints plain lines, for a
// person typing at a terminal while the output goes elsewhere.
type Options struct {
	// Terminal says that Out is a terminal: a spinner with the elapsed
	// time while a job works, its status beside it, and the prompt
	// redrawn at the bottom after every line (see Screen).
	Terminal bool
	// Width returns the terminal's columns (see ScreenOptions).
	Width func() int
	// Echo says that In is not a terminal (a pipe, a file, /dev/null):
	// nothing shows what is read, so each line is printed after the
	// prompt it answers, and the output reads as the conversation.
	Echo bool
	// Settle, with Echo, is called after each line: it returns once the
	// jobs started so far have finished or wait for a person, and what
	// they said is printed. So a script's lines are taken one after the
	// other, each after the answer to the one before, to the end of input.
	Settle func(ctx context.Context) error
}

// Console is one person's terminal conversation with Baton. It reads lines
// from In and prints Baton's posts and progress to Out; it is the Poster of
// the console platform for the outbox deliverer, a ButtonPoster so that an
// approval is asked inline: its preview, then AnswerPrompt, answered by the
// next line the person types. It is a FilePoster (a file a job produced is
// named by its path) and an engine.Stepper: each tool call is one line, and
// a spinner turns while a job works.
//
// One reader takes every line typed: while an approval waits, an answer
// (ParseAnswer) decides it; a `!` command or `/new`, `/quit` does what it
// always does; any other line is an ordinary message in the thread, as
// without the prompt, and the prompt is shown again. Several approvals are
// asked one after the other, oldest first.
type Console struct {
	svc    Service
	in     io.Reader
	scr    *Screen
	opts   Options
	author chat.Author
	now    func() time.Time

	mu      sync.Mutex        // guards the fields below
	status  map[string]string // the last text printed of each message, by id
	running map[string]int64  // the job a running status message (one with a Stop button) is of, by message id
	posted  []string          // texts posted lately, newest last
	asks    []ask             // approvals waiting for an answer, oldest first
	ids     int64             // messages posted, for their ids

	thread core.ThreadRef // the current thread; changed by /new (read loop only)
	seq    int
}

var (
	_ chat.Poster       = (*Console)(nil)
	_ chat.ButtonPoster = (*Console)(nil)
	_ chat.FilePoster   = (*Console)(nil)
	_ engine.Stepper    = (*Console)(nil)
)

// keptPosts is how many recent posts a status is compared with: a status
// that repeats one (a failure is posted, then is the job's status) is not
// printed twice.
const keptPosts = 16

// New returns a console for user (e.g. "alice") reading in and writing out.
func New(svc Service, in io.Reader, out io.Writer, user string, opts Options) *Console {
	c := &Console{
		svc: svc, in: in, opts: opts, now: time.Now, status: map[string]string{}, running: map[string]int64{},
		scr:    NewScreen(out, ScreenOptions{Terminal: opts.Terminal, Width: opts.Width}),
		author: chat.Author{ID: "console:" + user, Name: user},
	}
	c.scr.SetPrompt("> ")
	c.newThread()
	return c
}

// newThread starts a fresh conversation.
func (c *Console) newThread() {
	c.thread = core.ThreadRef{Platform: core.PlatformConsole, Channel: "chat", Thread: strconv.FormatInt(c.now().UnixNano(), 10)}
}

// consoleHelp is what !help adds about the console's own commands.
const consoleHelp = "Console: `/new` starts a new thread; `/quit` (or `/exit`, or the end of input) leaves."

// Run reads lines until /quit, the end of input or ctx ends. Each line is a
// message in the current thread; /new starts another thread. With
// Options.Echo the end of input comes after the last line's jobs have
// settled (Options.Settle).
func (c *Console) Run(ctx context.Context) error {
	c.scr.Println("Baton — type a request; /new starts a new thread, /quit leaves. !help lists the commands.")
	spinCtx, stopSpin := context.WithCancel(ctx)
	spun := make(chan struct{})
	go func() {
		defer close(spun)
		c.scr.Run(spinCtx)
	}()
	defer func() {
		stopSpin()
		<-spun
		c.scr.Close()
	}()
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
		if !c.opts.Echo {
			c.scr.ShowPrompt()
		}
		select {
		case <-ctx.Done():
			return nil
		case err := <-errc:
			return err
		case line := <-lines:
			c.scr.Entered(line, !c.opts.Echo)
			done, err := c.take(ctx, strings.TrimSpace(line))
			if done || err != nil {
				return err
			}
			if c.opts.Echo && c.opts.Settle != nil {
				if err := c.opts.Settle(ctx); err != nil {
					if errors.Is(err, context.Canceled) {
						return nil
					}
					return err
				}
			}
		}
	}
}

// take does what line says; done reports /quit (or the context's end).
func (c *Console) take(ctx context.Context, line string) (done bool, err error) {
	if a, ok := c.asking(); ok && line != "" {
		if v, ok := ParseAnswer(line); ok {
			if err := c.answer(ctx, a, v); errors.Is(err, context.Canceled) {
				return true, nil
			}
			return false, nil
		}
		if !strings.HasPrefix(line, "!") && !strings.HasPrefix(line, "/") {
			c.scr.Println("(sent as a message; the approval still waits for y, n or a)")
		}
	}
	switch line {
	case "":
		return false, nil
	case "/quit", "/exit":
		return true, nil
	case "/new":
		c.newThread()
		c.scr.Println("(a new thread)")
		return false, nil
	}
	c.seq++
	r, err := c.svc.HandleMessage(ctx, chat.Message{
		Thread: c.thread, Channel: localChannel, MsgID: strconv.Itoa(c.seq), Author: c.author,
		Text: line, Addressed: true, At: c.now(),
	})
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return true, nil
		}
		c.scr.Println("baton: " + err.Error())
		return false, nil
	}
	text := r.Text
	if isHelp(line) {
		text = strings.TrimSpace(text + "\n" + consoleHelp)
	}
	if text != "" {
		c.scr.Println(text)
	}
	return false, nil
}

// isHelp reports whether line is the !help command.
func isHelp(line string) bool {
	name, _, _ := strings.Cut(strings.TrimPrefix(line, "!"), " ")
	return strings.HasPrefix(line, "!") && strings.EqualFold(name, "help")
}

// promptLocked sets the prompt: the answer to the oldest approval that
// waits, else a message.
func (c *Console) promptLocked() {
	if len(c.asks) > 0 {
		c.scr.SetPrompt(c.asks[0].prompt())
		return
	}
	c.scr.SetPrompt("> ")
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
		c.scr.Println("(that answer is not offered here)")
		return nil
	}
	c.drop(a.msgID)
	r, err := c.svc.HandleAction(ctx, chat.Action{Value: action, Thread: a.thread, Channel: localChannel, MsgID: a.msgID, Author: c.author})
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return err
		}
		c.scr.Println("baton: " + err.Error())
		return nil
	}
	if r.Text != "" {
		c.scr.Println(r.Text)
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
	c.promptLocked()
}

// reaskLocked shows the approval prompt again after a print on a writer
// that is not a terminal, so that it stays the last line while an
// approval waits (a terminal keeps it at the bottom).
func (c *Console) reaskLocked() {
	if len(c.asks) > 0 && !c.opts.Echo {
		c.scr.ShowPrompt()
	}
}

// postLocked prints a post of Baton's.
func (c *Console) postLocked(text string) {
	text = strings.TrimSpace(text)
	c.posted = append(c.posted, text)
	if len(c.posted) > keptPosts {
		c.posted = c.posted[len(c.posted)-keptPosts:]
	}
	c.scr.Println("\nbaton: " + text)
}

// Post implements chat.Poster: Baton's messages are printed.
func (c *Console) Post(ctx context.Context, thread core.ThreadRef, text string) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.postLocked(text)
	c.reaskLocked()
	return c.idLocked(), nil
}

// Update implements chat.Poster: a changed status line is printed.
func (c *Console) Update(ctx context.Context, thread core.ThreadRef, msgID, text string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.updateLocked(msgID, text, nil)
	return nil
}

// updateLocked shows the new text of message msgID. A running job's status
// (the message has its Stop button) goes beside the spinner on a terminal;
// any other text is printed, unless it is the message's text already, or
// a post printed lately (a failure is posted, then is the job's status).
func (c *Console) updateLocked(msgID, text string, buttons []chat.Button) {
	text = strings.TrimSpace(text)
	if job, ok := stopOf(buttons); ok {
		c.running[msgID] = job
		if c.opts.Terminal {
			c.status[msgID] = text
			c.scr.Detail(job, strings.TrimPrefix(text, "⏳ "))
			return
		}
	} else if job, ok := c.running[msgID]; ok {
		delete(c.running, msgID)
		c.scr.Detail(job, "")
	}
	if c.status[msgID] == text {
		return
	}
	c.status[msgID] = text
	if slices.Contains(c.posted, text) {
		return
	}
	c.scr.Println("  " + text)
	c.reaskLocked()
}

// stopOf returns the job of a Stop button among buttons ("stop:J"): the
// message is the status of that running job.
func stopOf(buttons []chat.Button) (int64, bool) {
	for _, b := range buttons {
		verb, rest, _ := strings.Cut(b.Action, ":")
		if verb != "stop" {
			continue
		}
		if job, err := strconv.ParseInt(rest, 10, 64); err == nil {
			return job, true
		}
	}
	return 0, false
}

// PostButtons implements chat.ButtonPoster: the text is printed as a post;
// buttons that decide an approval put it on the prompt, behind those asked
// before it. A running job's first status (its Stop button) is shown as
// its later updates are.
func (c *Console) PostButtons(ctx context.Context, thread core.ThreadRef, text string, buttons []chat.Button) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	id := c.idLocked()
	if _, ok := stopOf(buttons); ok {
		c.updateLocked(id, text, buttons)
		return id, nil
	}
	c.status[id] = strings.TrimSpace(text)
	c.postLocked(text)
	if a, ok := askOf(thread, id, buttons); ok {
		c.asks = append(c.asks, a)
		c.promptLocked()
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
	c.updateLocked(msgID, text, buttons)
	return nil
}

// React implements chat.Poster: reactions mean nothing on a terminal.
func (c *Console) React(ctx context.Context, thread core.ThreadRef, msgID, emoji string, remove bool) error {
	return nil
}

// Upload implements chat.Poster: a long text the deliverer sends as a file
// is named; the files jobs produce come to PostFile.
func (c *Console) Upload(ctx context.Context, thread core.ThreadRef, name string, r io.Reader, size int64, comment string) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.scr.Println(fmt.Sprintf("\nbaton: file %s (%d bytes)", comment, size))
	c.reaskLocked()
	return c.idLocked(), nil
}

// PostFile implements chat.FilePoster: a file the job produced is listed
// with its path, to open from this machine.
func (c *Console) PostFile(ctx context.Context, thread core.ThreadRef, path string, size int64, comment string) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.scr.Println(fmt.Sprintf("baton: file %s (%d bytes)", path, size))
	c.reaskLocked()
	return c.idLocked(), nil
}

// Step implements engine.Stepper: the spinner shows what a job does, and
// each tool call is one line.
func (c *Console) Step(ctx context.Context, s engine.Step) {
	switch s.Kind {
	case engine.StepMovement, engine.StepThinking:
		c.scr.Begin(s.JobID, "thinking", s.At)
	case engine.StepTool:
		c.scr.Line("  " + StepLine(s))
		c.scr.Begin(s.JobID, s.Tool, s.At)
	case engine.StepDone:
		c.scr.End(s.JobID)
	}
}

// Notice prints a line about the work under way that no message carries
// (a retry of a request to the model).
func (c *Console) Notice(text string) {
	c.scr.Line("  " + text)
}

// Print prints text as it is, above the prompt (a verbose log's lines).
func (c *Console) Print(text string) {
	c.scr.Println(text)
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
