package tools

import (
	"strings"
	"sync/atomic"
	"time"
)

// resultSeq numbers the results FitResult keeps, so that two in the same
// second never share a file.
var resultSeq atomic.Int64

// FitResult fits text, the result of a tool that is not one of Baton's own
// (an MCP server's), to env's budget as Bash's output is fitted: its
// beginning and end are kept, and the note between them says how much was
// cut. When it is cut, the text (capped at DefaultKeptBytes) is kept under
// logs/<dir>/ and the note names that file for Read and Grep. A text that
// fits is returned as it is; invalid UTF-8 is replaced.
func FitResult(env *Env, dir, text string) string {
	text = strings.ToValidUTF8(text, "\uFFFD")
	counter := env.counter()
	if fits(text, env.budget(), counter) {
		return text
	}
	rel := "logs/" + dir + "/" + time.Now().UTC().Format("20060102T150405") + "-" + itoa(resultSeq.Add(1)) + ".txt"
	kept := text
	if len(kept) > DefaultKeptBytes {
		kept = kept[:snapHead(kept, DefaultKeptBytes)]
	}
	note := func(cut int) string {
		return "\n" + env.say("tools.result.cut", "cut", itoa(cut), "total", itoa(len(text)), "path", rel) + "\n"
	}
	if err := env.WS.WriteLog(rel, []byte(kept)); err != nil {
		env.logger().Warn("keeping a cut result failed", "path", rel, "err", err)
		note = func(cut int) string {
			return "\n" + env.say("tools.result.cut_not_kept", "cut", itoa(cut), "total", itoa(len(text))) + "\n"
		}
	}
	out, _ := headTail(text, env.budget(), counter, true, note)
	return out
}
