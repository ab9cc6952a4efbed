package docparse

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"unicode/utf8"
)

// Main is the child's entry point (`baton internal-parse`, or a test binary
// from its TestMain): it reads one request from stdin, caps its own
// resources as the request says, parses, writes one reply to stdout and
// returns the process exit code. It returns 0 whenever it wrote a reply,
// including a refusal of the input; any other code means the child failed
// (the Runner then looks at how it ended).
//
// Main changes the process's resource limits for good, so it must be the
// last thing a process does.
func Main(stdin io.Reader, stdout io.Writer) int {
	in := bufio.NewReaderSize(stdin, maxFrameLine)
	line, err := in.ReadSlice('\n')
	if err != nil {
		fmt.Fprintf(os.Stderr, "docparse: read the request: %v\n", err)
		return 2
	}
	var req request
	if err := json.Unmarshal(line, &req); err != nil {
		fmt.Fprintf(os.Stderr, "docparse: decode the request: %v\n", err)
		return 2
	}
	if err := limitSelf(req); err != nil {
		fmt.Fprintf(os.Stderr, "docparse: set the limits: %v\n", err)
		return 2
	}
	data, err := io.ReadAll(io.LimitReader(in, MaxInputBytes+1))
	if err != nil {
		fmt.Fprintf(os.Stderr, "docparse: read the input: %v\n", err)
		return 2
	}
	var res Result
	if len(data) > MaxInputBytes {
		err = &InvalidError{Reason: fmt.Sprintf("the file is over the %d MB limit", MaxInputBytes>>20)}
	} else {
		res, err = parse(req.Kind, data)
	}
	if err := writeReply(stdout, res, err); err != nil {
		fmt.Fprintf(os.Stderr, "docparse: write the reply: %v\n", err)
		return 2
	}
	return 0
}

// parse runs kind's parser. A panic in a parser is a refusal of the input:
// the parsers panic on some malformed files.
func parse(kind Kind, data []byte) (res Result, err error) {
	defer func() {
		if p := recover(); p != nil {
			res, err = Result{}, &InvalidError{Reason: fmt.Sprintf("malformed %s file: %v", kind, p)}
		}
	}()
	switch kind {
	case Docx:
		res.Text, err = docxText(data)
	case Pptx:
		res.Text, err = pptxText(data)
	case Xlsx:
		res.Text, err = xlsxText(data)
	case PDF:
		res.Text, err = pdfText(data)
	case Image:
		res, err = decodeImage(data)
	default:
		return Result{}, fmt.Errorf("unknown kind %q", kind)
	}
	if err != nil {
		return Result{}, err
	}
	res.Text = strings.ToValidUTF8(res.Text, "\uFFFD")
	if len(res.Text) > MaxTextBytes {
		n := MaxTextBytes
		for n > 0 && !utf8.RuneStart(res.Text[n]) {
			n--
		}
		res.Text = res.Text[:n]
	}
	return res, nil
}

func writeReply(w io.Writer, res Result, perr error) error {
	rep := reply{Format: res.Format, Width: res.Width, Height: res.Height, TextBytes: len(res.Text)}
	if perr != nil {
		var inv *InvalidError
		if !errors.As(perr, &inv) {
			inv = &InvalidError{Reason: perr.Error()}
		}
		rep = reply{Error: shortReason(inv.Reason)}
		res.Text = ""
	}
	head, err := json.Marshal(rep)
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(w)
	bw.Write(head)
	bw.WriteByte('\n')
	bw.WriteString(res.Text)
	return bw.Flush()
}

// maxStack caps one goroutine's stack in the child.
const maxStack = 64 << 20

// maxReason caps a refusal's reason in bytes: JSON escapes each byte into
// at most six, and the reply line must stay under maxFrameLine.
const maxReason = 512

// shortReason makes a parser's error message a short line of valid UTF-8:
// messages can quote the malformed input.
func shortReason(s string) string {
	s = strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return ' '
		}
		return r
	}, strings.ToValidUTF8(s, "\uFFFD"))
	if len(s) <= maxReason {
		return s
	}
	n := maxReason
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// limitSelf caps the process: CPU time, address space beyond what the Go
// runtime has reserved at start, no file writes, no core dumps, a few open
// files. A limit above the current hard limit is lowered to it (an
// unprivileged process cannot raise it).
func limitSelf(req request) error {
	if req.CPUSeconds == 0 || req.MemoryBytes <= 0 {
		return errors.New("the request names no CPU or memory limit")
	}
	// A Go process reserves about a gigabyte of address space at start
	// (more under the race detector) before it uses any: RLIMIT_AS is
	// that plus the budget. Without /proc (a sandbox that does not mount
	// it) the reservation is taken as 4 GiB.
	base := int64(4 << 30)
	if vm, err := vmSize(); err == nil {
		base = vm
	}
	debug.SetMemoryLimit(req.MemoryBytes * 3 / 4) // collect hard before the wall
	// Deep recursion on nested input ends early and plainly (the Runner
	// reports "stack overflow" as a refusal) instead of growing a stack to
	// the runtime's 1 GB default inside the memory limit.
	debug.SetMaxStack(int(min(req.MemoryBytes/4, maxStack)))
	limits := []struct {
		name     string
		resource int
		value    uint64
	}{
		{"RLIMIT_CPU", syscall.RLIMIT_CPU, req.CPUSeconds},
		{"RLIMIT_AS", syscall.RLIMIT_AS, uint64(base + req.MemoryBytes)},
		{"RLIMIT_FSIZE", syscall.RLIMIT_FSIZE, 0},
		{"RLIMIT_CORE", syscall.RLIMIT_CORE, 0},
		{"RLIMIT_NOFILE", syscall.RLIMIT_NOFILE, 16},
	}
	for _, l := range limits {
		var cur syscall.Rlimit
		if err := syscall.Getrlimit(l.resource, &cur); err != nil {
			return fmt.Errorf("get %s: %w", l.name, err)
		}
		v := min(l.value, cur.Max)
		// Soft and hard alike: past the CPU soft limit Linux sends
		// SIGXCPU, which the Go runtime ignores; at the hard limit
		// SIGKILL.
		if err := syscall.Setrlimit(l.resource, &syscall.Rlimit{Cur: v, Max: v}); err != nil {
			return fmt.Errorf("set %s to %d: %w", l.name, v, err)
		}
	}
	return nil
}

// vmSize reads the process's virtual memory size from /proc/self/status.
func vmSize() (int64, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	for line := range bytes.Lines(b) {
		if rest, ok := bytes.CutPrefix(line, []byte("VmSize:")); ok {
			f := strings.Fields(string(rest)) // "1226924 kB"
			if len(f) == 2 && f[1] == "kB" {
				kb, err := strconv.ParseInt(f[0], 10, 64)
				if err == nil {
					return kb << 10, nil
				}
			}
		}
	}
	return 0, errors.New("no VmSize in /proc/self/status")
}
