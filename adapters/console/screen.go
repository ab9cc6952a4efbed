package console

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
	"unicode"
)

// ScreenOptions configure a Screen.
type ScreenOptions struct {
	// Terminal says that the writer is a terminal: the bottom (the
	// spinner's line, then the prompt) is redrawn after every line with
	// ANSI escapes, and lines that must stay one line (the spinner, tool
	// steps) are cut to Width. Otherwise the Screen writes plain lines, no
	// escape codes and no spinner.
	Terminal bool
	// Width returns the terminal's width in columns; nil, or 0 returned,
	// stands for 80.
	Width func() int
	// Now is the clock of the spinner's elapsed time (time.Now).
	Now func() time.Time
	// Text is where Stream writes an answer's text as the model writes
	// it (baton run's stdout when it is a terminal); nil: Stream writes
	// nothing.
	Text io.Writer
}

// spinnerFrames are the spinner's frames, one per tick.
var spinnerFrames = []rune("⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏")

// Tick is how often Screen.Run redraws the spinner.
const Tick = 100 * time.Millisecond

// Screen is what a person sees of Baton on a terminal: lines printed one
// after the other, and at the bottom, redrawn after each of them, a spinner
// with the elapsed time while a job works and the prompt the next line of
// input answers. On a writer that is not a terminal it prints plain lines
// and keeps nothing at the bottom.
//
// On a terminal the person's own typing is echoed by the terminal at the
// prompt; the spinner's redraw keeps it, a printed line redraws the prompt
// without it (what was typed is still read when they press Enter).
//
// A Screen is safe for concurrent use; every method returns quickly.
type Screen struct {
	w     io.Writer
	term  bool
	width func() int
	now   func() time.Time

	mu       sync.Mutex       // guards the fields below and writes to w
	prompt   string           // the bottom's last line; "" none
	busy     map[int64]doing  // what each job does now, by job id
	details  map[int64]string // each job's status, beside its spinner
	drawn    int              // terminal: rows of the bottom on screen, the cursor on the last
	spinning bool             // terminal: the first of those rows is the spinner's
	frame    int
	dangling bool // plain: a prompt was printed and no newline after it
	closed   bool

	text      io.Writer // Stream's writer; nil none
	streaming bool      // Stream wrote text and nothing else was printed since
	midLine   bool      // that text does not end with a newline
}

// doing is a job's current step on the spinner.
type doing struct {
	label string
	since time.Time
}

// NewScreen returns a Screen writing to w.
func NewScreen(w io.Writer, opts ScreenOptions) *Screen {
	s := &Screen{w: w, term: opts.Terminal, width: opts.Width, now: opts.Now, text: opts.Text, busy: map[int64]doing{}, details: map[int64]string{}}
	if s.now == nil {
		s.now = time.Now
	}
	return s
}

// Terminal reports whether the Screen draws on a terminal.
func (s *Screen) Terminal() bool { return s.term }

// Println prints text (one line or more) above the bottom.
func (s *Screen) Println(text string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.printLocked(text)
}

func (s *Screen) printLocked(text string) {
	s.endTextLocked()
	if s.closed {
		fmt.Fprintln(s.w, text)
		return
	}
	if !s.term {
		if s.dangling {
			fmt.Fprintln(s.w)
			s.dangling = false
		}
		fmt.Fprintln(s.w, text)
		return
	}
	s.clearLocked(0)
	fmt.Fprintln(s.w, text)
	s.drawLocked()
}

// Line prints text as one line (its indent kept), cut to the terminal's
// width.
func (s *Screen) Line(text string) {
	rest := strings.TrimLeft(text, " ")
	indent := text[:len(text)-len(rest)]
	s.mu.Lock()
	defer s.mu.Unlock()
	s.printLocked(s.fitLocked(indent + oneLine(rest)))
}

// SetPrompt sets the bottom's last line, the prompt ("" for none); on a
// terminal it is redrawn at once.
func (s *Screen) SetPrompt(p string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.prompt == p {
		return
	}
	s.endTextLocked()
	s.prompt = p
	if s.term && !s.closed {
		s.clearLocked(0)
		s.drawLocked()
	}
}

// ShowPrompt prints the prompt once more on a writer that is not a
// terminal (a terminal shows it all the time): for a person who types at
// a terminal while Baton's output goes elsewhere.
func (s *Screen) ShowPrompt() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.term || s.prompt == "" || s.dangling {
		return
	}
	fmt.Fprint(s.w, s.prompt)
	s.dangling = true
}

// Entered records a line of input the person gave at the prompt: it stays
// in the conversation after the prompt that asked for it. echoed says that
// the terminal has already shown it and moved to the next line (the input
// is a terminal); otherwise it is printed here.
func (s *Screen) Entered(line string, echoed bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
	case !echoed && strings.TrimSpace(line) == "":
		// Nothing to show, and nothing moved.
	case !s.term:
		if s.dangling {
			if !echoed {
				fmt.Fprintln(s.w, line)
			} else {
				fmt.Fprintln(s.w)
			}
			s.dangling = false
		} else if !echoed {
			fmt.Fprintln(s.w, s.prompt+line)
		}
	case echoed && !s.spinning:
		// The prompt's row, with what the terminal echoed, stays as it
		// is (lines typed ahead too); the bottom starts on the row
		// below, or on the one that was drawn after lines typed ahead.
		fmt.Fprint(s.w, "\r\x1b[K")
		s.drawn = 0
		s.drawLocked()
	default:
		extra := 0
		if echoed {
			extra = 1 // the terminal's newline after the typed line
		}
		s.clearLocked(extra)
		fmt.Fprintln(s.w, s.prompt+line)
		s.drawLocked()
	}
}

// Begin shows that job has begun label (e.g. "thinking", "Bash") at since:
// the spinner turns while any job is busy, with the label and the elapsed
// time of the step begun last.
func (s *Screen) Begin(job int64, label string, since time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.endTextLocked()
	s.busy[job] = doing{label: label, since: since}
	s.redrawSpinnerLocked()
}

// Detail sets the text shown beside job's spinner (its status), "" for
// none.
func (s *Screen) Detail(job int64, text string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if text == "" {
		delete(s.details, job)
	} else {
		s.details[job] = oneLine(text)
	}
	if _, ok := s.busy[job]; ok {
		s.redrawSpinnerLocked()
	}
}

// End shows that job no longer works (it finished or waits for a person);
// the spinner stops when no job does.
func (s *Screen) End(job int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.endTextLocked()
	if _, ok := s.busy[job]; !ok {
		return
	}
	delete(s.busy, job)
	delete(s.details, job)
	if s.term && !s.closed {
		s.clearLocked(0)
		s.drawLocked()
	}
}

// Busy reports whether a job is shown at work.
func (s *Screen) Busy() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.busy) > 0
}

// Run turns the spinner every Tick until ctx ends. Without it the spinner
// is drawn at each change but does not turn.
func (s *Screen) Run(ctx context.Context) {
	if !s.term {
		return
	}
	t := time.NewTicker(Tick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.mu.Lock()
			if s.spinning {
				s.frame++
				s.redrawSpinnerLocked()
			}
			s.mu.Unlock()
		}
	}
}

// Close clears the bottom of a terminal; what is printed afterwards is
// plain lines.
func (s *Screen) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.endTextLocked()
	if s.term {
		s.clearLocked(0)
	}
	s.closed = true
}

// Stream writes text, a piece of an answer as the model writes it, to
// the Text writer: on a terminal the bottom is cleared first and stays
// off while the text runs (the spinner keeps its state but is not drawn);
// the next line printed, Begin, End, SetPrompt or Close ends the text's
// line and draws the bottom again. Control characters other than newline
// and tab are dropped: the model's text must not steer the terminal.
func (s *Screen) Stream(text string) {
	text = Printable(text)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.text == nil || text == "" {
		return
	}
	if !s.streaming {
		if s.term && !s.closed {
			s.clearLocked(0)
		}
		if s.dangling {
			fmt.Fprintln(s.w)
			s.dangling = false
		}
		s.streaming = true
	}
	fmt.Fprint(s.text, text)
	s.midLine = !strings.HasSuffix(text, "\n")
}

// endTextLocked ends the text Stream wrote, with a newline when its last
// line is open, and draws the bottom again on a terminal.
func (s *Screen) endTextLocked() {
	if !s.streaming {
		return
	}
	if s.midLine {
		fmt.Fprintln(s.text)
	}
	s.streaming, s.midLine = false, false
	if s.term && !s.closed {
		s.drawLocked()
	}
}

// Printable is text without the control characters that would steer a
// terminal (escape sequences, carriage returns, bells): newlines and tabs
// stay.
func Printable(text string) string {
	return strings.Map(func(r rune) rune {
		if r != '\n' && r != '\t' && unicode.IsControl(r) {
			return -1
		}
		return r
	}, text)
}

// clearLocked moves to the first row of the bottom and erases it and what
// is below; extra counts rows the cursor went down since it was drawn.
func (s *Screen) clearLocked(extra int) {
	if s.drawn == 0 && extra == 0 {
		return
	}
	up := max(s.drawn-1, 0) + extra
	b := "\r"
	if up > 0 {
		b += fmt.Sprintf("\x1b[%dA", up)
	}
	fmt.Fprint(s.w, b+"\x1b[J")
	s.drawn, s.spinning = 0, false
}

// drawLocked draws the bottom below the cursor, which is at the start of
// an empty row.
func (s *Screen) drawLocked() {
	if len(s.busy) > 0 {
		fmt.Fprint(s.w, s.spinnerLocked())
		s.drawn, s.spinning = 1, true
		if s.prompt != "" {
			fmt.Fprint(s.w, "\n")
		}
	}
	if s.prompt != "" {
		fmt.Fprint(s.w, s.prompt)
		s.drawn++
	}
}

// redrawSpinnerLocked draws the spinner's row again, keeping the cursor
// where it is (at the prompt, after what the person has typed so far).
func (s *Screen) redrawSpinnerLocked() {
	if !s.term || s.closed || s.streaming {
		return
	}
	if len(s.busy) == 0 && !s.spinning {
		return
	}
	if len(s.busy) == 0 || !s.spinning {
		// It appears or goes: the bottom changes height.
		s.clearLocked(0)
		s.drawLocked()
		return
	}
	if s.drawn == 1 {
		fmt.Fprint(s.w, "\r\x1b[K"+s.spinnerLocked())
		return
	}
	fmt.Fprintf(s.w, "\x1b7\x1b[%dA\r\x1b[K%s\x1b8", s.drawn-1, s.spinnerLocked())
}

// spinnerLocked is the spinner's row: the frame, what the job begun last
// does and for how long, and its status.
func (s *Screen) spinnerLocked() string {
	var job int64
	var d doing
	for id, b := range s.busy {
		if d.since.IsZero() || b.since.After(d.since) || (b.since.Equal(d.since) && id > job) {
			job, d = id, b
		}
	}
	text := fmt.Sprintf("%c %s %s", spinnerFrames[s.frame%len(spinnerFrames)], d.label, elapsed(s.now().Sub(d.since)))
	if more := len(s.busy) - 1; more > 0 {
		text += fmt.Sprintf(" (+%d more)", more)
	}
	if det := s.details[job]; det != "" {
		text += " · " + det
	}
	return s.fitLocked(text)
}

// fitLocked cuts text to the terminal's width, less one column (a line
// that fills the row would wrap the cursor to the next one).
func (s *Screen) fitLocked(text string) string {
	if !s.term {
		return text
	}
	w := 0
	if s.width != nil {
		w = s.width()
	}
	if w <= 0 {
		w = 80
	}
	return clipWidth(text, w-1)
}

// elapsed is d for the spinner: "4s", "1m05s".
func elapsed(d time.Duration) string {
	d = max(d, 0).Truncate(time.Second)
	if d < time.Minute {
		return fmt.Sprintf("%ds", int(d.Seconds()))
	}
	if d < time.Hour {
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	}
	return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
}

// oneLine joins text's lines with spaces and drops control characters, so
// that it takes one row.
func oneLine(text string) string {
	text = strings.Join(strings.Fields(text), " ")
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return -1
		}
		return r
	}, text)
}

// clipWidth cuts text to at most cols columns, ending it with "…" when
// cut; East Asian wide characters take two columns.
func clipWidth(text string, cols int) string {
	if cols <= 0 {
		return ""
	}
	total := 0
	for _, r := range text {
		total += runeWidth(r)
	}
	if total <= cols {
		return text
	}
	var b strings.Builder
	used := 0
	for _, r := range text {
		w := runeWidth(r)
		if used+w > cols-1 {
			break
		}
		b.WriteRune(r)
		used += w
	}
	return b.String() + "…"
}

// runeWidth is the columns r takes on a terminal: 0 for combining marks,
// 2 for East Asian wide and fullwidth characters and most emoji, else 1.
func runeWidth(r rune) int {
	switch {
	case unicode.Is(unicode.Mn, r) || unicode.Is(unicode.Me, r) || r == 0x200B || r == 0x200D || (r >= 0xFE00 && r <= 0xFE0F):
		return 0
	case r >= 0x1100 && r <= 0x115F, r >= 0x2E80 && r <= 0x303E, r >= 0x3041 && r <= 0x33FF,
		r >= 0x3400 && r <= 0x4DBF, r >= 0x4E00 && r <= 0x9FFF, r >= 0xA000 && r <= 0xA4CF,
		r >= 0xAC00 && r <= 0xD7A3, r >= 0xF900 && r <= 0xFAFF, r >= 0xFE30 && r <= 0xFE4F,
		r >= 0xFF00 && r <= 0xFF60, r >= 0xFFE0 && r <= 0xFFE6, r >= 0x1F300 && r <= 0x1F64F,
		r >= 0x1F900 && r <= 0x1F9FF, r >= 0x20000 && r <= 0x3FFFD,
		r == 0x231B, r == 0x23F3, r == 0x2705, r == 0x274C, r == 0x2753:
		return 2
	}
	return 1
}
