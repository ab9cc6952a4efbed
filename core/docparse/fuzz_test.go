package docparse_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/baton-bot/baton/core/docparse"
	"github.com/baton-bot/baton/core/docparse/docparsetest"
)

// The fuzz targets run each input through a child, as ReadDocument does: an
// input that makes a parser loop or allocate without bound ends as a
// TimeoutError or MemoryError of the child, which is the designed outcome,
// not a finding. A finding is a child that dies any other way (a runtime
// crash the child could not turn into a reply), a reply the protocol does
// not allow, or text that breaks the result's contract. The seeds are the
// well-formed testdata files with the target's extension and
// testdata/fuzz/<target>;
// `go test` without -fuzz runs them.

func FuzzDocx(f *testing.F) { fuzzKind(f, docparse.Docx, ".docx") }
func FuzzXlsx(f *testing.F) { fuzzKind(f, docparse.Xlsx, ".xlsx") }
func FuzzPPTX(f *testing.F) { fuzzKind(f, docparse.Pptx, ".pptx") }
func FuzzPDF(f *testing.F)  { fuzzKind(f, docparse.PDF, ".pdf") }

func fuzzKind(f *testing.F, kind docparse.Kind, ext string) {
	seeds, err := filepath.Glob(filepath.Join("testdata", "*"+ext))
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range seeds {
		if name := filepath.Base(s); strings.HasPrefix(name, "cyclic-") || strings.HasPrefix(name, "bomb") {
			continue // their own tests; as seeds they only cost the time limit
		}
		b, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	r := docparsetest.Runner(f)
	// Short limits: a looping input costs the fuzzer this much each time.
	r.Timeout, r.CPU, r.MemoryBytes = 3*time.Second, time.Second, 256<<20
	f.Fuzz(func(t *testing.T, data []byte) {
		res, err := r.Parse(context.Background(), kind, bytes.NewReader(data))
		var (
			inv *docparse.InvalidError
			te  *docparse.TimeoutError
			me  *docparse.MemoryError
		)
		switch {
		case err == nil:
			if !utf8.ValidString(res.Text) || len(res.Text) > docparse.MaxTextBytes {
				t.Fatalf("text of %d bytes, valid UTF-8 %v", len(res.Text), utf8.ValidString(res.Text))
			}
		case errors.As(err, &inv):
			if inv.Reason == "" {
				t.Fatal("a refusal without a reason")
			}
		case errors.As(err, &te), errors.As(err, &me):
			t.Logf("stopped at a limit: %v", err)
		default:
			t.Fatalf("the child failed: %v", err)
		}
	})
}
