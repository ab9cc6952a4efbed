package docparse

import (
	"bytes"
	"fmt"

	"github.com/ledongthuc/pdf"
)

// pdfText extracts the text of each page. The reader loops for ever on
// some malformed page trees (a /Kids or /Parent cycle) and panics on
// others; the child's limits stop the first, parse recovers the second.
func pdfText(data []byte) (string, error) {
	r, err := pdf.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return "", &InvalidError{Reason: fmt.Sprintf("not a valid PDF: %v", err)}
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
			return "", &InvalidError{Reason: fmt.Sprintf("page %d: %v", i, err)}
		}
		b.add(fmt.Sprintf("## Page %d\n%s\n\n", i, s))
	}
	return b.String(), nil
}
