package tools

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/baton-bot/baton/core/docparse"
)

// Parser parses untrusted files out of process for ReadDocument and
// ReadImage; *docparse.Runner implements it. Parse reads in to EOF and
// returns within about a second of ctx ending; its errors are docparse's
// (*docparse.InvalidError, *docparse.TimeoutError, *docparse.MemoryError),
// ctx's, or any other for a parser that failed. Implementations are safe for
// concurrent use.
type Parser interface {
	Parse(ctx context.Context, kind docparse.Kind, in io.Reader) (docparse.Result, error)
}

var _ Parser = (*docparse.Runner)(nil)

// parseFailure turns a Parser's error into the tool's error result: a
// refusal names the reason, a limit says what was stopped and what to try
// instead, and anything else is logged with a plain sentence for the model.
func parseFailure(tool, rel string, err error, log *slog.Logger) Result {
	var (
		inv *docparse.InvalidError
		te  *docparse.TimeoutError
		me  *docparse.MemoryError
	)
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return failure(tool, fmt.Errorf("parsing %s was stopped: %w", rel, err))
	case errors.As(err, &inv):
		return Errorf("%s: %s: %s", tool, rel, inv.Reason)
	case errors.As(err, &te):
		what := "took longer than " + seconds(te.Limit)
		if te.CPU {
			what = "used more than " + seconds(te.Limit) + " of CPU time"
		}
		return Errorf("%s: parsing %s %s and was stopped; the file may be malformed or too complex to read this way. "+
			"Try converting it with Bash (e.g. pdftotext, or libreoffice --headless --convert-to txt) if such a tool is installed, "+
			"or ask the user for another copy.", tool, rel, what)
	case errors.As(err, &me):
		return Errorf("%s: parsing %s needed more than %d MB of memory and was stopped; the file may be malformed "+
			"(e.g. a decompression bomb) or too large to read this way. Ask the user for a smaller or another copy.",
			tool, rel, me.LimitBytes>>20)
	default:
		log.Error("parse a file", "tool", tool, "path", rel, "err", err)
		return Errorf("%s: %s could not be parsed: the parser failed; the details are in Baton's log", tool, rel)
	}
}

// seconds formats a limit for the model: "30 s".
func seconds(d time.Duration) string {
	return fmt.Sprintf("%d s", int((d+time.Second-1)/time.Second))
}
