package console

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/chat"
)

// Service is what the console needs of the conversation service.
type Service interface {
	HandleMessage(ctx context.Context, m chat.Message) (chat.Reply, error)
}

// Console is one person's terminal conversation with Baton. It reads lines
// from In and prints Baton's posts and progress to Out; it is the Poster of
// the console platform for the outbox deliverer.
type Console struct {
	svc    Service
	in     io.Reader
	out    io.Writer
	author chat.Author
	now    func() time.Time

	mu     sync.Mutex // guards out and status
	status map[string]string

	thread core.ThreadRef // the current thread; changed by /new (read loop only)
	seq    int
}

var _ chat.Poster = (*Console)(nil)

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
				Thread: c.thread, Channel: "console:local", MsgID: strconv.Itoa(c.seq), Author: c.author,
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

func (c *Console) prompt() {
	c.printf("> ")
}

func (c *Console) printf(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	fmt.Fprintf(c.out, format, args...)
}

// Post implements chat.Poster: Baton's messages are printed.
func (c *Console) Post(ctx context.Context, thread core.ThreadRef, text string) (string, error) {
	c.printf("\nbaton: %s\n", strings.TrimSpace(text))
	return c.id(), nil
}

// Update implements chat.Poster: a changed status line is printed.
func (c *Console) Update(ctx context.Context, thread core.ThreadRef, msgID, text string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.status[msgID] == text {
		return nil
	}
	c.status[msgID] = text
	fmt.Fprintf(c.out, "\n  %s\n", strings.TrimSpace(text))
	return nil
}

// React implements chat.Poster: reactions mean nothing on a terminal.
func (c *Console) React(ctx context.Context, thread core.ThreadRef, msgID, emoji string, remove bool) error {
	return nil
}

// Upload implements chat.Poster: a file the job produced is named.
func (c *Console) Upload(ctx context.Context, thread core.ThreadRef, name string, r io.Reader, size int64, comment string) (string, error) {
	c.printf("\nbaton: file %s (%d bytes)\n", comment, size)
	return c.id(), nil
}

// Limits implements chat.Poster.
func (c *Console) Limits() chat.Limits {
	return chat.Limits{Post: 1 << 20, MaxParts: 1}
}

func (c *Console) id() string {
	return strconv.FormatInt(c.now().UnixNano(), 10)
}
