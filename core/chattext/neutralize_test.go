package chattext

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

func TestNeutralize(t *testing.T) {
	const z = "\u200b"
	tests := []struct {
		name string
		in   string
		p    Platform
		want string
	}{
		{"slack channel", "hey <!channel> look", Slack, "hey @" + z + "channel look"},
		{"slack here with label", "<!here|here> now", Slack, "@" + z + "here now"},
		{"slack everyone upper", "<!EVERYONE>", Slack, "@" + z + "everyone"},
		{"slack group legacy", "<!group>", Slack, "@" + z + "group"},
		{"slack subteam label", "ping <!subteam^S0123|@backend>", Slack, "ping @" + z + "backend"},
		{"slack subteam bare", "<!subteam^S0123>", Slack, "@" + z + "S0123"},
		{"slack unclosed", "<!channel and more", Slack, "<!" + z + "channel and more"},
		{"slack date left alone", "<!date^1392734382^{date}|Feb 18>", Slack, "<!date^1392734382^{date}|Feb 18>"},
		{"slack lookalike left alone", "<!channels>", Slack, "<!channels>"},
		{"slack plain words", "@channel @Here @everyone!", Slack, "@" + z + "channel @" + z + "Here @" + z + "everyone!"},
		{"slack user mention kept", "thanks <@U123> and @alice", Slack, "thanks <@U123> and @alice"},
		{"slack discord role untouched", "<@&123>", Slack, "<@&123>"},
		{"discord everyone here", "@everyone and @here", Discord, "@" + z + "everyone and @" + z + "here"},
		{"discord role", "ask <@&987654321>", Discord, "ask <@" + z + "&987654321>"},
		{"discord user kept", "<@123> <@!456>", Discord, "<@123> <@!456>"},
		{"discord slack syntax untouched", "<!channel>", Discord, "<!channel>"},
		{"plain all", "<!here> @everyone <@&1>", Plain, "@" + z + "here @" + z + "everyone <@" + z + "&1>"},
		{"label cannot smuggle", "<!here|<!channel>>", Slack, "<!" + z + "here|@" + z + "channel>"},
		{"email untouched", "me@here.example", Discord, "me@" + z + "here.example"},
		{"nothing to do", "plain text", Plain, "plain text"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Neutralize(tt.in, tt.p)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Neutralize(%q) (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}

// pingable reports a token in s that platform p would read as a mass
// mention, or "".
func pingable(s string, p Platform) string {
	l := strings.Map(func(r rune) rune {
		if r >= 'A' && r <= 'Z' {
			return r + 'a' - 'A'
		}
		return r
	}, s)
	var tokens []string
	if p != Discord {
		tokens = append(tokens, "@channel", "@here", "@everyone")
		for _, name := range slackSpecial {
			for i := 0; ; {
				j := strings.Index(l[i:], "<!"+name)
				if j < 0 {
					break
				}
				j += i
				if !isASCIIAlnumAt(l, j+2+len(name)) {
					return l[j:]
				}
				i = j + 1
			}
		}
	}
	if p != Slack {
		tokens = append(tokens, "@everyone", "@here", "<@&")
	}
	for _, tok := range tokens {
		if i := strings.Index(l, tok); i >= 0 {
			return l[i:]
		}
	}
	return ""
}

func FuzzNeutralize(f *testing.F) {
	for _, s := range []string{
		"<!channel>", "<!here|x>", "<!subteam^S1|@t>", "@everyone", "@HERE", "<@&1>",
		"<!<!here>channel>", "@<!here>everyone", "<!here|<!channel>>", "<!chan<!here>nel>",
		"<@<!here>&1>", "plain text", "<@U1>",
	} {
		for _, p := range []Platform{Plain, Slack, Discord} {
			f.Add(s, int(p))
		}
	}
	f.Fuzz(func(t *testing.T, text string, p int) {
		pl := Platform(((p % 3) + 3) % 3)
		got := Neutralize(text, pl)
		if tok := pingable(got, pl); tok != "" {
			t.Fatalf("Neutralize(%q, %d) = %q still pings at %q", text, pl, got, tok)
		}
		if again := Neutralize(got, pl); again != got {
			t.Fatalf("not idempotent: %q then %q", got, again)
		}
		name := NeutralizeName(text, pl)
		if tok := pingable(name, pl); tok != "" {
			t.Fatalf("NeutralizeName(%q, %d) = %q still pings at %q", text, pl, name, tok)
		}
		for _, r := range name {
			if r < 0x20 || r >= 0x7f && r <= 0x9f || r == '\u2028' || r == '\u2029' || isBidiControl(r) {
				t.Fatalf("NeutralizeName(%q, %d) = %q keeps %U", text, pl, name, r)
			}
		}
		if !utf8.ValidString(name) {
			t.Fatalf("NeutralizeName(%q, %d) = %q is not UTF-8", text, pl, name)
		}
	})
}

func TestNeutralizeName(t *testing.T) {
	const z = "\u200b"
	tests := []struct {
		name string
		in   string
		p    Platform
		want string
	}{
		{"plain name kept", "report-2025.md", Slack, "report-2025.md"},
		{"everyone", "@everyone.txt", Discord, "@" + z + "everyone.txt"},
		{"slack channel", "<!channel>.md", Slack, "@" + z + "channel.md"},
		{"plain both", "<!here> @everyone <@&1>.txt", Plain, "@" + z + "here @" + z + "everyone <@" + z + "&1>.txt"},
		{"right-to-left override", "invoice\u202efdp.exe", Slack, "invoicefdp.exe"},
		{"every bidi control", "a\u061cb\u200ec\u200fd\u202ae\u202bf\u202cg\u202dh\u2066i\u2067j\u2068k\u2069l", Plain, "abcdefghijkl"},
		{"newlines", "report.md\n\n<!channel> urgent", Slack, "report.md  @" + z + "channel urgent"},
		{"carriage return and tab", "a\rb\tc", Plain, "a b c"},
		{"line separators", "a\u2028b\u2029c", Plain, "a b c"},
		{"escape sequences", "\x1b[2Jname\x7f\u009b.txt", Plain, "[2Jname  .txt"},
		{"nul", "a\x00b", Plain, "a b"},
		{"invalid utf-8", "a\xffb", Plain, "a\ufffdb"},
		{"only controls", "\n\u202e\t", Plain, ""},
		{"non-latin kept", "報告書 ☃.pdf", Plain, "報告書 ☃.pdf"},
		{"path separators kept", "output/sub/@here.md", Slack, "output/sub/@" + z + "here.md"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := NeutralizeName(tt.in, tt.p)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("NeutralizeName(%q) (-want +got):\n%s", tt.in, diff)
			}
			if p := pingable(got, tt.p); p != "" {
				t.Errorf("NeutralizeName(%q) = %q still pings: %s", tt.in, got, p)
			}
			if again := NeutralizeName(got, tt.p); again != got {
				t.Errorf("not idempotent: %q, then %q", got, again)
			}
		})
	}
}
