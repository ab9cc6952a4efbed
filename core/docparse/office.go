package docparse

import (
	"archive/zip"
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/xuri/excelize/v2"
)

// Office limits. The child's memory limit bounds them all; these make a
// zip bomb a clear refusal rather than a memory error.
const (
	// maxXMLPart caps one decompressed XML part of a .docx or .pptx.
	maxXMLPart = 64 << 20
	// maxUnzipped caps what excelize unpacks of a .xlsx, and one of its
	// XML parts held in memory.
	maxUnzipped    = 256 << 20
	maxUnzippedXML = 64 << 20
)

// textBuilder collects extracted text up to MaxTextBytes.
type textBuilder struct{ strings.Builder }

func (b *textBuilder) add(s string) {
	if room := MaxTextBytes - b.Len(); room > 0 {
		if len(s) > room {
			s = s[:room]
		}
		b.WriteString(s)
	}
}

func (b *textBuilder) full() bool { return b.Len() >= MaxTextBytes }

func docxText(data []byte) (string, error) {
	z, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return "", &InvalidError{Reason: fmt.Sprintf("not a valid .docx (zip): %v", err)}
	}
	var b textBuilder
	if err := xmlText(z, "word/document.xml", &b); err != nil {
		return "", err
	}
	return b.String(), nil
}

var slideName = regexp.MustCompile(`^ppt/slides/slide(\d+)\.xml$`)

func pptxText(data []byte) (string, error) {
	z, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return "", &InvalidError{Reason: fmt.Sprintf("not a valid .pptx (zip): %v", err)}
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
		return "", &InvalidError{Reason: "no slides found (ppt/slides/slideN.xml)"}
	}
	sort.Slice(slides, func(i, j int) bool { return slides[i].n < slides[j].n })
	var b textBuilder
	for _, s := range slides {
		if b.full() {
			break
		}
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
		return &InvalidError{Reason: fmt.Sprintf("missing part %s: %v", name, err)}
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
			return &InvalidError{Reason: fmt.Sprintf("parse %s: %v", name, err)}
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

func xlsxText(data []byte) (string, error) {
	f, err := excelize.OpenReader(bytes.NewReader(data), excelize.Options{UnzipSizeLimit: maxUnzipped, UnzipXMLSizeLimit: maxUnzippedXML})
	if err != nil {
		return "", &InvalidError{Reason: fmt.Sprintf("not a valid .xlsx: %v", err)}
	}
	defer f.Close()
	var b textBuilder
	for _, sheet := range f.GetSheetList() {
		if b.full() {
			break
		}
		rows, err := f.Rows(sheet)
		if err != nil {
			return "", &InvalidError{Reason: fmt.Sprintf("sheet %s: %v", sheet, err)}
		}
		b.add(fmt.Sprintf("## Sheet: %s\n", sheet))
		for rows.Next() && !b.full() {
			cols, err := rows.Columns()
			if err != nil {
				rows.Close()
				return "", &InvalidError{Reason: fmt.Sprintf("sheet %s: %v", sheet, err)}
			}
			b.add(strings.Join(cols, "\t") + "\n")
		}
		if err := rows.Close(); err != nil {
			return "", &InvalidError{Reason: fmt.Sprintf("sheet %s: %v", sheet, err)}
		}
		b.add("\n")
	}
	return b.String(), nil
}
