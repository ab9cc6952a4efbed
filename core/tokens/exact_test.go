package tokens

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// checked are the encodings whose pre-split split.go has, each checked against
// the tokenizer.
var checked = []string{"o200k_base", "cl100k_base", "p50k_base", "r50k_base"}

// direct counts s with the tokenizer alone.
func direct(t testing.TB, b *BPE, s string) int {
	t.Helper()
	n, err := b.enc.codec.Count(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// agree checks that Count gives the tokenizer's count for s and that each
// piece of the pre-split holds, on the tokenizer's own token boundaries,
// the tokens Count gives it: a cut the tokenizer does not make fails
// even where the totals happen to agree.
func agree(t testing.TB, b *BPE, s string) {
	t.Helper()
	_, toks, err := b.enc.codec.Encode(s)
	if err != nil {
		t.Fatal(err)
	}
	v := b.enc.load()
	s0 := s
	if !utf8.ValidString(s) {
		s = string([]rune(s))
	}
	next := 0 // the tokenizer's tokens consumed
	pos := 0  // their bytes, and those passed over, in s
	for i := 0; i < len(s); {
		e := v.split(s, i)
		if e <= i { // passed over, by the tokenizer too
			_, w := classAt(s, i)
			i += w
			pos += w
			continue
		}
		n := 0
		for pos < e && next < len(toks) {
			pos += len(toks[next])
			next++
			n++
		}
		if pos != e {
			t.Fatalf("%s: piece %q ends inside the tokenizer's token %q; the text around: %q", b.Encoding(), s[i:e], toks[next-1], s[max(i-20, 0):min(e+20, len(s))])
		}
		if want := v.piece(s[i:e]); n != want {
			t.Fatalf("%s: piece %q is %d tokens, the tokenizer makes %d; the text around: %q", b.Encoding(), s[i:e], want, n, s[max(i-20, 0):min(e+20, len(s))])
		}
		i = e
	}
	if got, want := b.Count(s0), direct(t, b, s0); got != want {
		t.Fatalf("%s: Count(%q) = %d, the tokenizer says %d", b.Encoding(), s0, got, want)
	}
}

// TestCountMatchesTokenizer compares Count with the tokenizer on real
// text: Baton's sources, English, Japanese and mixed samples, and the
// cases the engine treats apart.
func TestCountMatchesTokenizer(t *testing.T) {
	samples := []string{
		"Hello, world!  How's it going?\n\n  - item one\n  - item two\n",
		"報告書を要約してください。明日までに、three points で。",
		"x := f(y)   // comment\n\tif err != nil {\n\t\treturn err\n\t}\n",
		"  leading spaces, trailing spaces   \n\n\n   \t mixed \r\n crlf",
		"emoji 🎉🎉 and numbers 1234567 3.14159 and URLs https://example.com/a?b=c&d=e",
		"  \n  \n  x", "a \n \n b\r\n\r\n \t\n", "\n\n \n\t\nx",
		"it's IT'S they'RE we'Ve I'M you'll he'D itſ it'ſ 'll 'LL 'x ''s",
		"CamelCaseWords HTTPServer iOS McDonald's ǅungla Ǆ ǈ ʰʲ ﬁ",
		"e\u0301 \u0301\u0301a \u0301A A\u0301 \u0301 1\u0301 ́", // combining marks
		"٣٤٥ ²³ Ⅻ ½ 12345 1,234.5 ١٢٣", "/path/to/file//x\n/\r\n/", "\u00a0\u2003x\u3000\u0085y\u2028z",
		"\xff\xfe\xfd ab\xc3 \xe2\x82", "<|endoftext|> <|fim_prefix|>",
		strings.Repeat(" ", 100) + "x" + strings.Repeat("\t \n", 100) + "y" + strings.Repeat("\n", 70),
		strings.Repeat("a", 500) + strings.Repeat("=", 300) + strings.Repeat("9", 40) + strings.Repeat("日本", 200),
	}
	files, _ := filepath.Glob(filepath.Join("..", "*", "*.go"))
	for _, f := range files[:min(len(files), 40)] {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		samples = append(samples, string(src))
	}
	for _, enc := range checked {
		b, err := New(enc)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range samples {
			agree(t, b, s)
		}
	}
}

// TestClasses checks the class tables against the classes the tokenizer's
// matchers test, for every rune.
func TestClasses(t *testing.T) {
	bmpOnce.Do(buildBMP)
	for r := rune(0); r <= unicode.MaxRune; r++ {
		var want uint8
		if unicode.In(r, unicode.L) {
			want |= cLetter
		}
		if unicode.In(r, unicode.Lu, unicode.Lt, unicode.Lm, unicode.Lo, unicode.M) {
			want |= cUpper
		}
		if unicode.In(r, unicode.Ll, unicode.Lm, unicode.Lo, unicode.M) {
			want |= cLower
		}
		if unicode.In(r, unicode.N) {
			want |= cNumber
		}
		if unicode.IsSpace(r) {
			want |= cSpace
		}
		if r == '\r' || r == '\n' {
			want |= cNewline
		}
		if r == 0x7f {
			want |= cDel
		}
		if got := classOf(r); got != want {
			t.Fatalf("classOf(%U) = %07b, want %07b", r, got, want)
		}
		if r >= 0xD800 && r < 0xE000 {
			continue // not in valid UTF-8
		}
		if got, w := classAt(string(r), 0); got != want || w != utf8.RuneLen(r) {
			t.Fatalf("classAt(%U) = %07b, %d, want %07b, %d", r, got, w, want, utf8.RuneLen(r))
		}
	}
}

// alphabet is what random texts are made of: a rune of each class the
// expressions tell apart, and the characters they name.
var alphabet = []string{
	"a", "z", "A", "Z", "s", "t", "S", "T", "r", "e", "v", "m", "l", "L", "d", "D", "E", "ſ", "'", "'",
	"ǅ", "ʰ", "日", "本", "ß", "é", "É", "\u0301", "\u0903", "\u20dd", "ﬁ", "Ω", "ω",
	"0", "7", "٣", "²", "Ⅻ", "½",
	" ", " ", " ", "\t", "\n", "\n", "\r", "\v", "\f", "\u0085", "\u00a0", "\u2003", "\u2028", "\u3000",
	"/", "/", ".", ",", "-", "=", "(", ")", "{", "}", "\"", "#", "_", "é", "€", "🎉", "\ufffd", "\u200b", "\x00", "\x7f",
	"\xff", "\xc3", "\xe2\x82",
}

// TestRandomTextMatchesTokenizer compares Count with the tokenizer on
// random texts over alphabet.
func TestRandomTextMatchesTokenizer(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	for _, enc := range checked {
		b, err := New(enc)
		if err != nil {
			t.Fatal(err)
		}
		for range 3000 {
			var sb strings.Builder
			for n := rnd.IntN(60); n >= 0; n-- {
				sb.WriteString(alphabet[rnd.IntN(len(alphabet))])
			}
			agree(t, b, sb.String())
		}
	}
}

// TestEveryRuneMatchesTokenizer puts each rune of the Basic Multilingual
// Plane (and a sample beyond) in the contexts the expressions tell apart,
// many runes to a text.
func TestEveryRuneMatchesTokenizer(t *testing.T) {
	if testing.Short() {
		t.Skip("a few seconds")
	}
	contexts := []string{"a%s", " %s", "A%s's", "%s%s1", "%sb", "'%s", "/%s\n", " %sZ"}
	for _, c := range []struct {
		enc  string
		step rune // every step-th rune (r50k_base has p50k_base's pre-split)
	}{{"o200k_base", 1}, {"cl100k_base", 2}, {"p50k_base", 5}} {
		b, err := New(c.enc)
		if err != nil {
			t.Fatal(err)
		}
		var sb strings.Builder
		flush := func() {
			agree(t, b, sb.String())
			sb.Reset()
		}
		for r := rune(0); r <= unicode.MaxRune; r += c.step {
			if r >= 0x10000 && r%61 != 0 || r >= 0xD800 && r < 0xE000 {
				continue
			}
			for _, f := range contexts {
				sb.WriteString(strings.ReplaceAll(f, "%s", string(r)))
			}
			if sb.Len() > 4000 {
				flush()
			}
		}
		flush()
	}
}

func FuzzCountMatchesTokenizer(f *testing.F) {
	f.Add("Hello, world!  How's it going?")
	f.Add("a\n b\t\tc  d.\n\ne")
	f.Add("日本語 と English ")
	f.Add("  \n  \n  x")
	f.Add("it'S ǅA\u0301b ٣٤٥ //\n")
	var bs []*BPE
	for _, enc := range checked {
		b, err := New(enc)
		if err != nil {
			f.Fatal(err)
		}
		bs = append(bs, b)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) > 2000 {
			return // the tokenizer is quadratic in whitespace runs
		}
		for _, b := range bs {
			agree(t, b, s)
		}
	})
}
