package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

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
func (ReadDocument) Description() string {
	return "Extract the text of a Word (.docx), Excel (.xlsx, cells tab-separated), PowerPoint (.pptx) or PDF " +
		"document in the workspace. Long text is cut to fit the context; the whole text is then kept as a " +
		"text file under logs/documents/ to Read (with offset) or Grep."
}

// Schema implements Tool.
func (ReadDocument) Schema() json.RawMessage {
	return json.RawMessage(`{"type":"object","properties":{` +
		`"path":{"type":"string","description":"document path relative to the workspace"}},` +
		`"required":["path"],"additionalProperties":false}`)
}

// Call implements Tool.
func (t ReadDocument) Call(ctx context.Context, env *Env, raw json.RawMessage) Result {
	var a documentArgs
	if err := decode(raw, &a); err != nil {
		return failure(t.Name(), err)
	}
	return t.read(ctx, env, a.Path)
}

func (t ReadDocument) read(ctx context.Context, env *Env, rel string) Result {
	text, err := t.extract(ctx, env, rel)
	if err != nil {
		var perr *parseError
		if errors.As(err, &perr) {
			return parseFailure(t.Name(), rel, perr.err, env.logger())
		}
		return failure(t.Name(), err)
	}
	if strings.TrimSpace(text) == "" {
		return Result{Text: fmt.Sprintf("%s contains no extractable text (it may be scanned images).", rel)}
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
			return fmt.Sprintf("\n[ReadDocument cut to fit the token budget after %d of %d characters; convert the document with Bash and use Read/Grep on the result]",
				n, len(text))
		}
		return fmt.Sprintf("\n[ReadDocument cut to fit the token budget. The whole text is kept in %s: Read on with offset=%d there, or Grep it.]", kept, line)
	})
	return Result{Text: out}
}

// parseError carries a Parser's error to parseFailure.
type parseError struct{ err error }

func (e *parseError) Error() string { return e.err.Error() }

// extract opens the document and has the Parser extract its text.
func (t ReadDocument) extract(ctx context.Context, env *Env, rel string) (string, error) {
	if rel == "" {
		return "", errors.New("path is required")
	}
	if _, err := env.WS.Resolve(rel); err != nil {
		return "", err // the clear error for a path outside
	}
	ext := strings.ToLower(path.Ext(rel))
	kind, ok := documentKinds[ext]
	if !ok {
		return "", fmt.Errorf("%s: %q documents are not supported (only .docx, .xlsx, .pptx, .pdf); use Read for text files", rel, ext)
	}
	f, fi, err := env.WS.OpenRead(rel)
	if err != nil {
		return "", err
	}
	defer f.Close()
	if t.Parser == nil {
		return "", errors.New("documents cannot be read here: no parser process is configured")
	}
	if fi.Size() > MaxDocumentBytes {
		return "", fmt.Errorf("%s is %d bytes, over the %d MB limit for documents", rel, fi.Size(), MaxDocumentBytes>>20)
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
