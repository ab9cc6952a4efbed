package chattext

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

// names is a lookup over a map, counting its calls.
func names(m map[string]string, calls *int) func(string) (string, bool) {
	return func(id string) (string, bool) {
		if calls != nil {
			*calls++
		}
		n, ok := m[id]
		return n, ok
	}
}

// The examples are Slack's ("Formatting text for app surfaces") and
// Discord's ("Message Formatting") documented ones.
func TestReadableSlack(t *testing.T) {
	const p = Slack
	refs := Refs{
		User:    names(map[string]string{"U0G9QF9C6": "Jo Ann", "U2": "bob"}, nil),
		Channel: names(map[string]string{"C0NAMELESS": "random"}, nil),
	}
	tests := []struct{ name, in, want string }{
		{"user mention", "Hey <@U0G9QF9C6>, did you see my file?", "Hey @Jo Ann, did you see my file?"},
		{"unknown user keeps its id", "ask <@U999>", "ask @U999"},
		{"legacy label when unknown", "ask <@U999|carol>", "ask @carol"},
		{"name beats the legacy label", "ask <@U2|robert>", "ask @bob"},
		{"channel", "see <#C024BE7LR|general>", "see #general"},
		{"channel without a name", "see <#C0NAMELESS> and <#C0UNKNOWN|>", "see #random and #C0UNKNOWN"},
		{"special mentions", "<!here> <!channel> <!everyone> <!here|here>", "@here @channel @everyone @here"},
		{"user group", "ping <!subteam^SAZ94GDB8|@happy-peeps>", "ping @happy-peeps"},
		{"user group without a handle", "ping <!subteam^SAZ94GDB8>", "ping @SAZ94GDB8"},
		{"link with a label", "read <https://example.com|This message *is* a link>", "read This message *is* a link (https://example.com)"},
		{"bare link", "<https://example.com/a?b=1&amp;c=2>", "https://example.com/a?b=1&c=2"},
		{"link labelled with itself", "<https://example.com|example.com>", "https://example.com"},
		{"mail", "<mailto:bob@example.com|bob@example.com> or <mailto:bob@example.com|Email Bob Roberts>",
			"bob@example.com or Email Bob Roberts (mailto:bob@example.com)"},
		{"date", "<!date^1392734382^Posted {date_num} {time_secs}|Posted 2014-02-18 6:39:42 AM PST>", "2014-02-18T14:39:42Z"},
		{"date with a bad time keeps the fallback", "<!date^soon^{date}|tomorrow>", "tomorrow"},
		{"entities decoded once", "a &lt;b&gt; &amp;&amp; &amp;lt;", "a <b> && &lt;"},
		{"entities in labels", "<https://e.test|R&amp;D>", "R&D (https://e.test)"},
		{"unknown command left", "<!foo> <!here^x>", "<!foo> <!here^x>"},
		{"not a reference", "<not a ref> <ftp:x|y>", "<not a ref> <ftp:x|y>"},
		{"unclosed", "a <@U2 b <#C1|x", "a <@U2 b <#C1|x"},
		{"nested opening", "<<@U2>>", "<@bob>"},
		{"empty ids left", "<@> <#> <!subteam^> <@&>", "<@> <#> <!subteam^> <@&>"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, Readable(p, tt.in, refs)); diff != "" {
				t.Errorf("Readable(%q) (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}

func TestReadableDiscord(t *testing.T) {
	const p = Discord
	refs := Refs{
		User:    names(map[string]string{"80351110224678912": "Nelly"}, nil),
		Role:    names(map[string]string{"165511591545143296": "mods"}, nil),
		Channel: names(map[string]string{"103735883630395392": "general"}, nil),
	}
	tests := []struct{ name, in, want string }{
		{"user", "<@80351110224678912> hi", "@Nelly hi"},
		{"user with a nickname", "<@!80351110224678912> hi", "@Nelly hi"},
		{"unknown user", "<@1234>", "@1234"},
		{"role", "<@&165511591545143296>, look", "@mods, look"},
		{"unknown role", "<@&99>", "@&99"},
		{"channel", "in <#103735883630395392>", "in #general"},
		{"unknown channel", "in <#77>", "in #77"},
		{"custom emoji", "<:mmLol:216154654256398347> <a:b1nzy:392938283556143104>", ":mmLol: :b1nzy:"},
		{"slash command", "use </airhorn:816437322781949972>", "use /airhorn"},
		{"timestamps", "<t:1618953630> <t:1618953630:R> <t:1618953630:d>", "2021-04-20T21:20:30Z 2021-04-20T21:20:30Z 2021-04-20T21:20:30Z"},
		{"bad timestamps left", "<t:abc:R> <t:1618953630:X> <t:>", "<t:abc:R> <t:1618953630:X> <t:>"},
		{"out of range timestamp left", "<t:99999999999999:R>", "<t:99999999999999:R>"},
		{"entities stay as typed", "a &amp; b &lt;", "a &amp; b &lt;"},
		{"suppressed embed", "<https://discord.com/developers>", "https://discord.com/developers"},
		{"malformed emoji left", "<:x:> <::1> <:a:b:c>", "<:x:> <::1> <:a:b:c>"},
		{"comparison", "if a < b and c > d", "if a < b and c > d"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, Readable(p, tt.in, refs)); diff != "" {
				t.Errorf("Readable(%q) (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}

func TestReadableLooksUpEachReference(t *testing.T) {
	var calls int
	got := Readable(Slack, "<@U1> <@U2> <#C1|x> <@U1>", Refs{User: names(map[string]string{"U1": "a"}, &calls)})
	if got != "@a @U2 #x @a" || calls != 3 {
		t.Errorf("Readable = %q with %d lookups, want %q with 3", got, calls, "@a @U2 #x @a")
	}
}

var readableSeeds = []string{
	"",
	"plain text",
	"Hey <@U0G9QF9C6>, see <#C024BE7LR|general> and <https://e.test|the doc>",
	"<!here> <!subteam^S1|@team> <!date^1392734382^{date}|x> &amp;&lt;&gt;",
	"<@80351110224678912> <@!1> <@&2> <#3> <:e:4> <a:e:5> <t:1618953630:R> </cmd sub:6>",
	"<<<>>> <@ <# <! <t: <: <a: </ <|> <@|> <http://|>",
	"<mailto:a@b.c|a@b.c> <ftp://x> <https://x|<y>>",
	"\xff<@\xfe>\x00<t:-62167219200>",
}

// FuzzReadable checks what Readable promises for any text: it never panics,
// keeps valid UTF-8 valid, leaves text without references alone, and
// keeps every character of what it does not understand.
func FuzzReadable(f *testing.F) {
	for _, s := range readableSeeds {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, in string, escaped bool) {
		p := Discord
		if escaped {
			p = Slack
		}
		refs := Refs{
			User: names(map[string]string{"U1": "alice"}, nil), Role: names(map[string]string{"2": "mods"}, nil),
			Channel: names(map[string]string{"3": "general"}, nil)}
		got := Readable(p, in, refs)
		if utf8.ValidString(in) && !utf8.ValidString(got) {
			t.Fatalf("Readable(%q) = %q is not valid UTF-8", in, got)
		}
		if !strings.Contains(in, "<") && (!escaped || !strings.Contains(in, "&")) && got != in {
			t.Fatalf("Readable(%q) = %q changed text without references", in, got)
		}
		if !escaped && strings.Count(got, "<") > strings.Count(in, "<") {
			t.Fatalf("Readable(%q) = %q made up a <", in, got)
		}
		// Names are short here; ids and ISO times grow a reference by
		// less than 16 bytes.
		if len(got) > 16*len(in)+16 {
			t.Fatalf("Readable(%q) grew to %d bytes", in, len(got))
		}
	})
}
