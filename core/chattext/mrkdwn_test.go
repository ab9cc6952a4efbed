package chattext

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSlackMrkdwn(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string
	}{
		{"bold", "**bold** and __bold__", "*bold* and *bold*"},
		{"italic", "*italic* and _italic_", "_italic_ and _italic_"},
		{"bold italic", "***both***", "*_both_*"},
		{"strike", "~~gone~~ but ~/home stays", "~gone~ but ~/home stays"},
		{"nested", "*a **b** c*", "_a *b* c_"},
		{"intraword left alone", "snake_case_name, 2*3*4 and foo**bar**", "snake_case_name, 2*3*4 and foo**bar**"},
		{"unmatched", "a * b ** c _ d", "a * b ** c _ d"},
		{"backslash escape", `\*not italic\*`, "*not italic*"},
		{"link", "see [the docs](https://example.com/docs)", "see <https://example.com/docs|the docs>"},
		{"link with ampersand in url", "[q](https://example.com/?a=1&b=2)", "<https://example.com/?a=1&b=2|q>"},
		{"link label formatting dropped, & kept", "[**R&D** plan](http://x.test/p)", "<http://x.test/p|R&D plan>"},
		{"link url with space and bar encoded", "[x](<https://e.test/a b|c>)", "<https://e.test/a%20b%7Cc|x>"},
		{"link with title", `[x](https://e.test "Title")`, "<https://e.test|x>"},
		{"link with parens in url", "[wiki](https://en.wikipedia.org/wiki/Go_(language))", "<https://en.wikipedia.org/wiki/Go_(language)|wiki>"},
		{"relative link kept as text", "[main](./cmd/main.go)", "main (./cmd/main.go)"},
		{"unsafe scheme not linked", "[click](javascript:alert(1))", "click (javascript:alert(1))"},
		{"special mention as url is inert", "[x](<!channel>)", "x (!channel)"},
		{"image", "![diagram](https://e.test/d.png)", "<https://e.test/d.png|diagram>"},
		{"autolink", "<https://e.test/?a&b>", "<https://e.test/?a&b>"},
		{"slack references kept", "<@U123> in <#C1|general> with <@U2|bob>", "<@U123> in <#C1|general> with <@U2|bob>"},
		{"special mention escaped", "<!channel> <!here>", "&lt;!channel&gt; &lt;!here&gt;"},
		{"escapes", "a < b && c > d", "a &lt; b &amp;&amp; c &gt; d"},
		{"heading", "# Title", "*Title*"},
		{"heading with bold and closing hashes", "## The **real** title ##", "*The real title*"},
		{"heading keeps C#", "### Using C#", "*Using C#*"},
		{"not a heading", "#hashtag and #123", "#hashtag and #123"},
		{"bullets", "- one\n* two\n  + nested", "• one\n• two\n  • nested"},
		{"task list", "- [ ] todo\n- [x] done", "• ☐ todo\n• ☑ done"},
		{"numbered list stays", "1. first **bold**\n2) second", "1. first *bold*\n2) second"},
		{"quote", "> quoted **text** & more", "> quoted *text* &amp; more"},
		{"rules stay", "---\n* * *\n___", "---\n* * *\n___"},
		{"inline code untouched but escaped", "run `a**b** && <c>` now", "run `a**b** &amp;&amp; &lt;c&gt;` now"},
		{"double backtick code", "``x `y` z``", "``x `y` z``"},
		{"double backtick code without backticks", "`` **x** ``", "`**x**`"},
		{"emphasis does not close inside code", "**a `b**` c**", "*a `b**` c*"},
		{
			"fenced code untouched but escaped, info dropped",
			"```go\nx := a**b** && c < d // [l](http://x)\n```\nafter **bold**",
			"```\nx := a**b** &amp;&amp; c &lt; d // [l](http://x)\n```\nafter *bold*",
		},
		{"tilde fence", "~~~\n~~not strike~~\n~~~", "```\n~~not strike~~\n```"},
		{"unclosed fence closed", "```\ncode **x**", "```\ncode **x**\n```"},
		{"inline triple backticks", "use ```x``` here", "use `x` here"},
		{"indented fence in list", "- step:\n  ```sh\n  ls *.go\n  ```", "• step:\n```\n  ls *.go\n```"},
		{"blank lines kept", "a\n\n\nb", "a\n\n\nb"},
		{"unicode emphasis", "**日本語** and _émoji 👍_", "*日本語* and _émoji 👍_"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := SlackMrkdwn(tt.in)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("SlackMrkdwn(%q) (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}

// TestSlackMrkdwnPathological checks that deeply nested or unmatched
// delimiters convert without blowing up.
func TestSlackMrkdwnPathological(t *testing.T) {
	for _, in := range []string{
		strings.Repeat("*a ", 200000),
		strings.Repeat("*", 100000),
		strings.Repeat("**a ", 1000) + strings.Repeat("a** ", 1000),
		strings.Repeat("[", 50000) + strings.Repeat("]", 50000),
		strings.Repeat("`", 30000) + "x",
	} {
		got := SlackMrkdwn(in)
		if strings.Count(got, "<") != strings.Count(got, ">") {
			t.Errorf("unbalanced angle brackets for input of %d bytes", len(in))
		}
	}
}

func FuzzSlackMrkdwn(f *testing.F) {
	for _, s := range []string{"**a**", "[x](https://e.test/?a&b)", "```\n<x>\n```", "<!here>", "<@U1>", "*a _b_ c*"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		got := SlackMrkdwn(in)
		// Every < that reaches Slack opens a link or a user or channel
		// reference it produced; none can be a special mention.
		for i := 0; i < len(got); i++ {
			if got[i] != '<' {
				continue
			}
			rest := got[i+1:]
			if !(safeURL(rest) || strings.HasPrefix(rest, "@") || strings.HasPrefix(rest, "#")) {
				t.Fatalf("SlackMrkdwn(%q) = %q has a raw < at %d", in, got, i)
			}
		}
	})
}
