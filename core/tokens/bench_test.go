package tokens

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// BenchmarkCount counts 4 KB texts, each a new string (as a tool's output
// is): Go source (a different 4 KB of Baton's sources each time, so the
// ranks it needs are not all in the CPU's caches), English prose,
// Japanese; "tokenizer/…" is the tokenizer's own count of the same texts.
//
//	go test ./core/tokens -run '^$' -bench Count -benchmem
func BenchmarkCount(b *testing.B) {
	files, _ := filepath.Glob(filepath.Join("..", "..", "*", "*", "*.go"))
	var src []string
	for _, f := range files {
		text, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		for len(text) >= 4096 {
			src = append(src, string(text[:4096]))
			text = text[4096:]
		}
	}
	if len(src) < 100 {
		b.Fatalf("only %d chunks of source", len(src))
	}
	texts := map[string][]string{
		"go":       src,
		"english":  {strings.Repeat("The report covers the third quarter: revenue rose 4.2%, costs fell, and the team shipped two releases. ", 50)},
		"japanese": {strings.Repeat("報告書は第三四半期を対象とし、売上は四・二パーセント増え、費用は減った。", 50)},
	}
	c := Default()
	for _, name := range []string{"go", "english", "japanese"} {
		chunks := texts[name]
		for i, text := range chunks {
			text = text[:min(len(text), 4096)]
			for len(text) > 0 && !utf8.RuneStart(text[len(text)-1]) {
				text = text[:len(text)-1]
			}
			chunks[i] = strings.ToValidUTF8(text, "")
		}
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(chunks[0])))
			for i := range b.N {
				c.Count(strings.Clone(chunks[i%len(chunks)]))
			}
		})
		b.Run("tokenizer/"+name, func(b *testing.B) {
			b.SetBytes(int64(len(chunks[0])))
			for i := range b.N {
				c.enc.codec.Count(strings.Clone(chunks[i%len(chunks)]))
			}
		})
	}
}
