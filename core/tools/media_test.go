package tools

import (
	"archive/zip"
	"bytes"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/baton-bot/baton/core/docparse/docparsetest"
	"github.com/go-pdf/fpdf"
	"github.com/google/go-cmp/cmp"
	"github.com/xuri/excelize/v2"
)

func TestReadImage(t *testing.T) {
	env := newEnv(t)
	img := image.NewRGBA(image.Rect(0, 0, 4, 3))
	img.Set(1, 1, color.RGBA{R: 255, A: 255})
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	put(t, env, "input/shot.jpg", buf.Bytes()) // the name lies: content decides
	res := call(t, ReadImage{Parser: docparsetest.Runner(t)}, env, obj{"path": "input/shot.jpg"})
	ok(t, res)
	if len(res.Images) != 1 {
		t.Fatalf("%d images", len(res.Images))
	}
	if diff := cmp.Diff(Image{MIME: "image/png", Data: buf.Bytes()}, res.Images[0]); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if !strings.Contains(res.Text, "4×3") {
		t.Errorf("text %q lacks the size", res.Text)
	}
	put(t, env, "input/notes.png", []byte("just text"))
	failed(t, call(t, ReadImage{Parser: docparsetest.Runner(t)}, env, obj{"path": "input/notes.png"}))
	put(t, env, "input/huge.png", append(buf.Bytes(), make([]byte, MaxImageBytes)...))
	failed(t, call(t, ReadImage{Parser: docparsetest.Runner(t)}, env, obj{"path": "input/huge.png"}))
}

// zipFile writes a zip archive of the given parts.
func zipFile(tb testing.TB, env *Env, rel string, parts map[string]string) {
	tb.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for name, body := range parts {
		w, err := zw.Create(name)
		if err != nil {
			tb.Fatal(err)
		}
		w.Write([]byte(body))
	}
	if err := zw.Close(); err != nil {
		tb.Fatal(err)
	}
	put(tb, env, rel, buf.Bytes())
}

func TestReadDocument(t *testing.T) {
	env := newEnv(t)
	zipFile(t, env, "input/memo.docx", map[string]string{
		"[Content_Types].xml": `<?xml version="1.0"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"/>`,
		"word/document.xml": `<?xml version="1.0" encoding="UTF-8"?>
<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body>
<w:p><w:r><w:t>Quarterly memo</w:t></w:r></w:p>
<w:p><w:r><w:t xml:space="preserve">Budget </w:t></w:r><w:r><w:t>approved</w:t></w:r></w:p>
<w:tbl><w:tr><w:tc><w:p><w:r><w:t>cell one</w:t></w:r></w:p></w:tc><w:tc><w:p><w:r><w:t>cell two</w:t></w:r></w:p></w:tc></w:tr></w:tbl>
</w:body></w:document>`,
	})
	zipFile(t, env, "input/deck.pptx", map[string]string{
		"ppt/slides/slide2.xml":  `<p:sld xmlns:p="p" xmlns:a="a"><p:cSld><p:spTree><p:sp><p:txBody><a:p><a:r><a:t>Roadmap second</a:t></a:r></a:p></p:txBody></p:sp></p:spTree></p:cSld></p:sld>`,
		"ppt/slides/slide1.xml":  `<p:sld xmlns:p="p" xmlns:a="a"><p:cSld><p:spTree><p:sp><p:txBody><a:p><a:r><a:t>Welcome first</a:t></a:r></a:p></p:txBody></p:sp></p:spTree></p:cSld></p:sld>`,
		"ppt/slides/slide10.xml": `<p:sld xmlns:p="p" xmlns:a="a"><a:p><a:r><a:t>Closing tenth</a:t></a:r></a:p></p:sld>`,
	})
	xf := excelize.NewFile()
	xf.SetCellValue("Sheet1", "A1", "Region")
	xf.SetCellValue("Sheet1", "B1", "Sales")
	xf.SetCellValue("Sheet1", "A2", "Kanto")
	xf.SetCellValue("Sheet1", "B2", 1234)
	if err := xf.SaveAs(filepath.Join(env.WS.Root(), "input/sales.xlsx")); err != nil {
		t.Fatal(err)
	}
	pdf := fpdf.New("P", "mm", "A4", "")
	pdf.AddPage()
	pdf.SetFont("Helvetica", "", 14)
	pdf.Cell(40, 10, "Invoice total due")
	if err := pdf.OutputFileAndClose(filepath.Join(env.WS.Root(), "input/invoice.pdf")); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		path string
		want []string
	}{
		{"input/memo.docx", []string{"Quarterly memo\n", "Budget approved\n", "cell one \tcell two"}},
		{"input/deck.pptx", []string{"## Slide 1\nWelcome first", "## Slide 2\nRoadmap second", "## Slide 10\nClosing tenth"}},
		{"input/sales.xlsx", []string{"## Sheet: Sheet1", "Region\tSales\n", "Kanto\t1234\n"}},
		{"input/invoice.pdf", []string{"Invoice total due"}},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			got := ok(t, call(t, ReadDocument{Parser: docparsetest.Runner(t)}, env, obj{"path": tt.path}))
			last := -1
			for _, w := range tt.want {
				i := strings.Index(got, w)
				if i < 0 {
					t.Fatalf("%q missing from:\n%s", w, got)
				}
				if i < last {
					t.Errorf("%q out of order in:\n%s", w, got)
				}
				last = i
			}
		})
	}
	put(t, env, "input/fake.docx", []byte("not a zip"))
	failed(t, call(t, ReadDocument{Parser: docparsetest.Runner(t)}, env, obj{"path": "input/fake.docx"}))
	put(t, env, "input/fake.pdf", []byte("%PDF-1.4 broken"))
	failed(t, call(t, ReadDocument{Parser: docparsetest.Runner(t)}, env, obj{"path": "input/fake.pdf"}))
	put(t, env, "input/a.odt", []byte("x"))
	failed(t, call(t, ReadDocument{Parser: docparsetest.Runner(t)}, env, obj{"path": "input/a.odt"}))
}

func TestReadDocumentCut(t *testing.T) {
	env := newEnv(t)
	xf := excelize.NewFile()
	for r := 1; r <= 3000; r++ {
		xf.SetCellValue("Sheet1", "A"+strconv.Itoa(r), "row number "+strconv.Itoa(r))
		xf.SetCellValue("Sheet1", "B"+strconv.Itoa(r), r*7)
	}
	if err := xf.SaveAs(filepath.Join(env.WS.Root(), "input/big.xlsx")); err != nil {
		t.Fatal(err)
	}
	got := ok(t, call(t, ReadDocument{Parser: docparsetest.Runner(t)}, env, obj{"path": "input/big.xlsx"}))
	if n := env.Tokens.Count(got); n > env.TokenizerBudget {
		t.Fatalf("%d tokens over budget %d", n, env.TokenizerBudget)
	}
	m := offsetHint.FindStringSubmatch(got)
	if m == nil || !strings.Contains(got, "logs/documents/input_big.xlsx.txt") {
		t.Fatalf("no hint to the kept text in: %q", got[max(0, len(got)-300):])
	}
	kept, err := os.ReadFile(filepath.Join(env.WS.Root(), "logs/documents/input_big.xlsx.txt"))
	if err != nil || !strings.Contains(string(kept), "row number 3000\t21000") {
		t.Fatalf("kept copy: %v", err)
	}
	offset, _ := strconv.Atoi(m[1])
	more := ok(t, call(t, Read{}, env, obj{"path": "logs/documents/input_big.xlsx.txt", "offset": offset, "limit": 1}))
	body, _, _ := strings.Cut(got, "\n[ReadDocument cut")
	lastShown := body[strings.LastIndex(strings.TrimSuffix(body, "\n"), "\n")+1:]
	if strings.Contains(more, strings.TrimSpace(lastShown)) {
		t.Errorf("continuing repeats the last shown line %q: %q", lastShown, more)
	}
}
