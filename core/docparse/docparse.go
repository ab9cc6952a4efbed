// Package docparse parses untrusted documents and images in a child process,
// so that a malformed file cannot hang or exhaust the process that asked.
//
// The parsers (Word, Excel, PowerPoint, PDF, and the image decoders) are
// third-party or standard-library code that was not written for hostile
// input: a 1 KB PDF whose page tree is a cycle makes the PDF reader loop
// for ever, a zip bomb or a PNG that declares 100000×100000 pixels asks for
// gigabytes. Nothing can interrupt such a call inside a Go process, so the
// parsing happens in a child: the parent's Runner starts it (the baton binary
// itself, re-executed with the hidden Subcommand, possibly inside a
// sandbox), streams it the file's bytes on stdin and reads the result from
// stdout; the child (Main) caps its own CPU time, memory, open files and
// file writes before it reads the input, and the Runner kills the child's
// process group when its wall-clock limit passes or the caller's context
// ends. The child needs no file system access at all.
//
// The protocol is two small frames. The request on the child's stdin is one
// JSON line (the kind of input and the limits) followed by the input's
// bytes up to EOF. The reply on stdout is one JSON line (an error sentence,
// or the result's fields and the length of its text) followed by exactly
// that many bytes of text.
package docparse

import (
	"fmt"
	"time"
)

// Subcommand is the argument that makes the baton binary run Main: `baton
// internal-parse` (not listed in the help). Tests re-execute their own binary
// with it, from a TestMain that calls Main when os.Args[1] is Subcommand.
const Subcommand = "internal-parse"

// Kind names a parser.
type Kind string

// The parsers.
const (
	Docx  Kind = "docx"  // Word: the text runs of word/document.xml
	Pptx  Kind = "pptx"  // PowerPoint: the slides' text, in slide order
	Xlsx  Kind = "xlsx"  // Excel: each sheet's cells, tab-separated
	PDF   Kind = "pdf"   // the text of each page
	Image Kind = "image" // PNG, JPEG, GIF or WebP: decoded whole to validate it
)

// Input and output limits.
const (
	// MaxInputBytes caps the input the child reads.
	MaxInputBytes = 64 << 20
	// MaxTextBytes caps the text a document parser returns: the rest is cut.
	MaxTextBytes = 10 << 20
	// MaxImagePixels caps an image's declared width × height; a larger one
	// is refused before any pixel is decoded.
	MaxImagePixels = 40_000_000
)

// Result is what a parser found.
type Result struct {
	// Text is a document's text (documents only), valid UTF-8, at most
	// MaxTextBytes.
	Text string
	// Format ("png", "jpeg", "gif", "webp"), Width and Height describe an
	// image (Image only).
	Format        string
	Width, Height int
}

// InvalidError reports that the parser refused the input: it is not a
// valid file of its kind, or is over a limit of the format. Reason is a
// sentence for the model, e.g. "not a valid PDF: malformed PDF file:
// missing final startxref".
type InvalidError struct{ Reason string }

func (e *InvalidError) Error() string { return e.Reason }

// TimeoutError reports that the child ran past its wall-clock limit or its
// CPU-time limit and was stopped.
type TimeoutError struct {
	Limit time.Duration
	CPU   bool // the CPU-time limit, not the wall clock
}

func (e *TimeoutError) Error() string {
	if e.CPU {
		return fmt.Sprintf("docparse: the parser used more than %v of CPU time and was stopped", e.Limit)
	}
	return fmt.Sprintf("docparse: the parser ran for more than %v and was stopped", e.Limit)
}

// MemoryError reports that the child ran out of the memory it was allowed.
type MemoryError struct{ LimitBytes int64 }

func (e *MemoryError) Error() string {
	return fmt.Sprintf("docparse: the parser needed more than %d MiB of memory and was stopped", e.LimitBytes>>20)
}

// OutputError reports that the child wrote more than the protocol allows.
type OutputError struct{ LimitBytes int64 }

func (e *OutputError) Error() string {
	return fmt.Sprintf("docparse: the parser's output is over %d bytes", e.LimitBytes)
}

// request is the first line of the child's stdin.
type request struct {
	Kind Kind `json:"kind"`
	// CPUSeconds is RLIMIT_CPU (soft and hard).
	CPUSeconds uint64 `json:"cpu_seconds"`
	// MemoryBytes is how much address space the child may add to what its
	// runtime reserved at start (RLIMIT_AS), and its Go memory limit.
	MemoryBytes int64 `json:"memory_bytes"`
}

// reply is the first line of the child's stdout; TextBytes bytes of text
// follow it.
type reply struct {
	Error     string `json:"error,omitempty"`
	TextBytes int    `json:"text_bytes,omitempty"`
	Format    string `json:"format,omitempty"`
	Width     int    `json:"width,omitempty"`
	Height    int    `json:"height,omitempty"`
}

// maxFrameLine caps a request or reply line.
const maxFrameLine = 4096
