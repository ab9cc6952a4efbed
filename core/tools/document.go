package tools

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"path"
	"strconv"
	"strings"

	"github.com/baton-bot/baton/core/catalog"
	"github.com/baton-bot/baton/core/docparse"
)

// MaxDocumentBytes caps the size of a document file ReadDocument opens. The
// extracted text is capped at docparse.MaxTextBytes.
const MaxDocumentBytes = docparse.MaxInputBytes

// documentKinds maps a document's extension to its parser.
var documentKinds = map[string]docparse.Kind{
	".docx": docparse.Docx,
	".pptx": docparse.Pptx,
	".xlsx": docparse.Xlsx,
	".pdf":  docparse.PDF,
}

// ReadDocument extracts the text of .docx, .xlsx, .pptx and .pdf files, cut
// to the budget like Read. When cut, the whole text is kept under
// logs/documents/ for Read and Grep to reach the rest.
//
// The parsing runs in a child process through Parser, which stops it at its
// time and memory limits and when the call's context ends (abort): the
// parsers loop for ever or exhaust memory on some malformed files. Without a
// Parser the tool refuses every call; it never parses in process.
type ReadDocument struct {
	Parser Parser
}

type documentArgs struct {
	Path string `json:"path"`
}

// Name implements Tool.
func (ReadDocument) Name() string { return "ReadDocument" }

// Description implements Tool.
func (ReadDocument) Description(tx *catalog.Texts) string {
	return tx.Text("tools.document.description")
}

// Schema implements Tool.
func (ReadDocument) Schema(tx *catalog.Texts) json.RawMessage {
	return schema(tx, "document", `{"type":"object","properties":{`+
		`"path":{"type":"string","description":$path}},`+
		`"required":["path"],"additionalProperties":false}`)
}

// Call implements Tool.
func (t ReadDocument) Call(ctx context.Context, env *Env, raw json.RawMessage) Result {
	var a documentArgs
	if err := decode(raw, &a); err != nil {
		return env.fail(t.Name(), "", err)
	}
	return t.read(ctx, env, a.Path)
}

func (t ReadDocument) read(ctx context.Context, env *Env, rel string) Result {
	text, err := t.extract(ctx, env, rel)
	if err != nil {
		var perr *parseError
		if errors.As(err, &perr) {
			return parseFailure(env, t.Name(), rel, perr.err)
		}
		return env.fail(t.Name(), rel, err)
	}
	if strings.TrimSpace(text) == "" {
		return Result{Text: env.say("tools.document.no_text", "path", rel)}
	}
	budget, c := env.budget(), env.counter()
	if fits(text, budget, c) {
		return Result{Text: text}
	}
	kept, err := keepDocument(env, rel, text)
	if err != nil {
		env.logger().Warn("keep document text", "path", rel, "err", err)
	}
	out, _ := head(text, budget, c, func(n int) string {
		line := strings.Count(text[:n], "\n") + 1
		if kept == "" {
			return "\n" + env.say("tools.document.cut_unkept", "n", itoa(n), "total", itoa(len(text)))
		}
		return "\n" + env.say("tools.document.cut_kept", "path", kept, "line", itoa(line))
	})
	return Result{Text: out}
}

// parseError carries a Parser's error to parseFailure.
type parseError struct{ err error }

func (e *parseError) Error() string { return e.err.Error() }

// extract opens the document and has the Parser extract its text.
func (t ReadDocument) extract(ctx context.Context, env *Env, rel string) (string, error) {
	if rel == "" {
		return "", fault("tools.err.path_required")
	}
	if _, err := env.WS.Resolve(rel); err != nil {
		return "", err // the clear error for a path outside
	}
	ext := strings.ToLower(path.Ext(rel))
	kind, ok := documentKinds[ext]
	if !ok {
		return "", fault("tools.document.unsupported", "path", quote(rel), "ext", strconv.Quote(ext))
	}
	f, fi, err := env.WS.OpenRead(rel)
	if err != nil {
		return "", err
	}
	defer f.Close()
	if t.Parser == nil {
		return "", fault("tools.document.no_parser")
	}
	if fi.Size() > MaxDocumentBytes {
		return "", fault("tools.document.too_big", "path", quote(rel), "size", itoa(fi.Size()), "mb", itoa(MaxDocumentBytes>>20))
	}
	// One byte over the limit lets the child refuse a file that grew.
	res, err := t.Parser.Parse(ctx, kind, io.LimitReader(f, MaxDocumentBytes+1))
	if err != nil {
		return "", &parseError{err}
	}
	return res.Text, nil
}

// keepDocument writes the whole text to logs/documents/ and returns its
// workspace-relative path.
func keepDocument(env *Env, rel, text string) (string, error) {
	name := strings.Map(func(r rune) rune {
		if r == '/' || r == '\\' || r < ' ' {
			return '_'
		}
		return r
	}, strings.TrimPrefix(rel, "./")) + ".txt"
	kept := "logs/documents/" + name
	if err := env.WS.WriteLog(kept, []byte(text)); err != nil {
		return "", err
	}
	return kept, nil
}
