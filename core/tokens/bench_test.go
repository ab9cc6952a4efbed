package tokens

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// BenchmarkCount counts 4 KB texts, each a new string (as a tool's output
// is): Go source, English prose, Japanese; "tokenizer" is the tokenizer's
// own count of the same texts.
//
//	go test ./core/tokens -run '^$' -bench Count -benchmem
func BenchmarkCount(b *testing.B) {
	src, err := os.ReadFile(filepath.Join("tokens.go"))
	if err != nil {
		b.Fatal(err)
	}
	texts := map[string]string{
		"go":       string(src),
		"english":  strings.Repeat("The report covers the third quarter: revenue rose 4.2%, costs fell, and the team shipped two releases. ", 50),
		"japanese": strings.Repeat("報告書は第三四半期を対象とし、売上は四・二パーセント増え、費用は減った。", 50),
	}
	c := Default()
	for _, name := range []string{"go", "english", "japanese"} {
		text := texts[name]
		text = text[:min(len(text), 4096)]
		for len(text) > 0 && !utf8.RuneStart(text[len(text)-1]) {
			text = text[:len(text)-1]
		}
		text = strings.ToValidUTF8(text, "")
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			for range b.N {
				c.Count(strings.Clone(text))
			}
		})
		b.Run(name+"/tokenizer", func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			for range b.N {
				c.enc.codec.Count(strings.Clone(text))
			}
		})
	}
}
