package tools

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/baton-bot/baton/core/catalog"
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
func parseFailure(env *Env, tool, rel string, err error) Result {
	var (
		inv *docparse.InvalidError
		te  *docparse.TimeoutError
		me  *docparse.MemoryError
	)
	p := quote(rel)
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		err = fault("tools.parse.stopped", "path", p, "reason", env.explain(rel, err))
	case errors.As(err, &inv):
		err = fault("tools.parse.invalid", "path", p, "reason", inv.Reason)
	case errors.As(err, &te):
		key := "tools.parse.timeout_wall"
		if te.CPU {
			key = "tools.parse.timeout_cpu"
		}
		err = fault(key, "path", p, "limit", seconds(env.texts(), te.Limit))
	case errors.As(err, &me):
		err = fault("tools.parse.memory", "path", p, "mb", itoa(me.LimitBytes>>20))
	default:
		env.logger().Error("parse a file", "tool", tool, "path", rel, "err", err)
		err = fault("tools.parse.failed", "path", p)
	}
	return env.fail(tool, rel, err)
}

// seconds formats a limit for the model: "30 s" ("30 秒").
func seconds(tx *catalog.Texts, d time.Duration) string {
	return tx.Fill("tools.seconds", "n", itoa(int((d+time.Second-1)/time.Second)))
}
