package tools

import (
	"archive/zip"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/ledongthuc/pdf"
	"github.com/xuri/excelize/v2"
)

// Document limits.
const (
	// MaxDocumentBytes caps the size of a document file ReadDocument opens.
	MaxDocumentBytes = 64 << 20
	// maxDocumentText caps the extracted text (and its kept copy).
	maxDocumentText = 10 << 20
	// maxXMLPart caps one decompressed XML part of a .docx or .pptx, so a
	// zip bomb cannot exhaust memory.
	maxXMLPart = 64 << 20
)

// ReadDocument extracts the text of .docx, .xlsx, .pptx and .pdf files, cut
// to the budget like Read. When cut, the whole text is kept under
// logs/documents/ for Read and Grep to reach the rest.
type ReadDocument struct{}

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
	res, err := t.read(env, a.Path)
	if err != nil {
		return failure(t.Name(), err)
	}
	return res
}

func (t ReadDocument) read(env *Env, rel string) (Result, error) {
	if rel == "" {
		return Result{}, errors.New("path is required")
	}
	f, fi, err := env.WS.OpenRead(rel)
	if err != nil {
		return Result{}, err
	}
	defer f.Close()
	if fi.Size() > MaxDocumentBytes {
		return Result{}, fmt.Errorf("%s is %d bytes, over the %d MB limit for documents", rel, fi.Size(), MaxDocumentBytes>>20)
	}
	var text string
	switch ext := strings.ToLower(path.Ext(rel)); ext {
	case ".docx":
		text, err = docxText(f, fi.Size())
	case ".pptx":
		text, err = pptxText(f, fi.Size())
	case ".xlsx":
		text, err = xlsxText(f)
	case ".pdf":
		text, err = pdfText(f, fi.Size())
	default:
		return Result{}, fmt.Errorf("%s: %q documents are not supported (only .docx, .xlsx, .pptx, .pdf); use Read for text files", rel, ext)
	}
	if err != nil {
		return Result{}, fmt.Errorf("extract text from %s: %w", rel, err)
	}
	text = strings.ToValidUTF8(text, "\uFFFD")
	if strings.TrimSpace(text) == "" {
		return Result{Text: fmt.Sprintf("%s contains no extractable text (it may be scanned images).", rel)}, nil
	}
	budget, c := env.budget(), env.counter()
	if fits(text, budget, c) {
		return Result{Text: text}, nil
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
	return Result{Text: out}, nil
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

// textBuilder collects extracted text up to maxDocumentText.
type textBuilder struct{ strings.Builder }

func (b *textBuilder) add(s string) {
	if room := maxDocumentText - b.Len(); room > 0 {
		if len(s) > room {
			s = s[:room]
		}
		b.WriteString(s)
	}
}

func (b *textBuilder) full() bool { return b.Len() >= maxDocumentText }

func docxText(r io.ReaderAt, size int64) (string, error) {
	z, err := zip.NewReader(r, size)
	if err != nil {
		return "", fmt.Errorf("not a valid .docx (zip): %w", err)
	}
	var b textBuilder
	if err := xmlText(z, "word/document.xml", &b); err != nil {
		return "", err
	}
	return b.String(), nil
}

var slideName = regexp.MustCompile(`^ppt/slides/slide(\d+)\.xml$`)

func pptxText(r io.ReaderAt, size int64) (string, error) {
	z, err := zip.NewReader(r, size)
	if err != nil {
		return "", fmt.Errorf("not a valid .pptx (zip): %w", err)
	}
	type slide struct {
		n    int
		name string
	}
	var slides []slide
	for _, f := range z.File {
		if m := slideName.FindStringSubmatch(f.Name); m != nil {
			n, _ := strconv.Atoi(m[1])
			slides = append(slides, slide{n, f.Name})
		}
	}
	if len(slides) == 0 {
		return "", errors.New("no slides found (ppt/slides/slideN.xml)")
	}
	sort.Slice(slides, func(i, j int) bool { return slides[i].n < slides[j].n })
	var b textBuilder
	for _, s := range slides {
		b.add(fmt.Sprintf("## Slide %d\n", s.n))
		if err := xmlText(z, s.name, &b); err != nil {
			return "", err
		}
		b.add("\n")
	}
	return b.String(), nil
}

// xmlText appends the text runs of an Office Open XML part: <w:t>/<a:t>
// text, paragraph ends as newlines, tabs and breaks, table cells separated
// by tabs.
func xmlText(z *zip.Reader, name string, b *textBuilder) error {
	f, err := z.Open(name)
	if err != nil {
		return fmt.Errorf("missing part %s: %w", name, err)
	}
	defer f.Close()
	dec := xml.NewDecoder(io.LimitReader(f, maxXMLPart))
	inText, inCell := false, 0
	for !b.full() {
		tok, err := dec.Token()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("parse %s: %w", name, err)
		}
		switch el := tok.(type) {
		case xml.StartElement:
			switch el.Name.Local {
			case "t":
				inText = true
			case "tab":
				b.add("\t")
			case "br", "cr":
				b.add("\n")
			case "tc":
				inCell++
			}
		case xml.EndElement:
			switch el.Name.Local {
			case "t":
				inText = false
			case "p":
				if inCell > 0 {
					b.add(" ")
				} else {
					b.add("\n")
				}
			case "tc":
				inCell--
				b.add("\t")
			case "tr":
				b.add("\n")
			}
		case xml.CharData:
			if inText {
				b.add(string(el))
			}
		}
	}
	return nil
}

func xlsxText(r io.Reader) (string, error) {
	f, err := excelize.OpenReader(r)
	if err != nil {
		return "", fmt.Errorf("not a valid .xlsx: %w", err)
	}
	defer f.Close()
	var b textBuilder
	for _, sheet := range f.GetSheetList() {
		rows, err := f.Rows(sheet)
		if err != nil {
			return "", fmt.Errorf("sheet %s: %w", sheet, err)
		}
		b.add(fmt.Sprintf("## Sheet: %s\n", sheet))
		for rows.Next() && !b.full() {
			cols, err := rows.Columns()
			if err != nil {
				rows.Close()
				return "", fmt.Errorf("sheet %s: %w", sheet, err)
			}
			b.add(strings.Join(cols, "\t") + "\n")
		}
		if err := rows.Close(); err != nil {
			return "", fmt.Errorf("sheet %s: %w", sheet, err)
		}
		b.add("\n")
	}
	return b.String(), nil
}

func pdfText(ra io.ReaderAt, size int64) (text string, err error) {
	// The PDF parser panics on some malformed files.
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("malformed PDF: %v", r)
		}
	}()
	r, err := pdf.NewReader(ra, size)
	if err != nil {
		return "", fmt.Errorf("not a valid PDF: %w", err)
	}
	var b textBuilder
	fonts := make(map[string]*pdf.Font)
	for i := 1; i <= r.NumPage() && !b.full(); i++ {
		page := r.Page(i)
		if page.V.IsNull() {
			continue
		}
		for _, name := range page.Fonts() {
			if _, ok := fonts[name]; !ok {
				font := page.Font(name)
				fonts[name] = &font
			}
		}
		s, err := page.GetPlainText(fonts)
		if err != nil {
			return "", fmt.Errorf("page %d: %w", i, err)
		}
		b.add(fmt.Sprintf("## Page %d\n%s\n\n", i, s))
	}
	return b.String(), nil
}
