package chattext

import (
	"strings"
	"unicode/utf8"
)

// Platform names the chat platform a text is written for.
type Platform int

// Platforms.
const (
	// Plain is text whose destination is not known in advance (the console,
	// a file, a webhook): Neutralize makes inert everything Slack or
	// Discord would ping on.
	Plain Platform = iota
	Slack
	Discord
)

// zwsp is a zero-width space: invisible, and it stops a platform from
// reading what follows an @ as a mention keyword.
const zwsp = "\u200b"

// slackSpecial are the names of Slack's special mentions written <!name>
// that ping many people; <!group> is the legacy form of <!channel> in
// private channels and <!subteam^ID> pings a user group.
var slackSpecial = []string{"channel", "here", "everyone", "group", "subteam"}

// broadcast are the words that ping many people when written after an @:
// on Slack when a message is posted with link_names, on Discord always
// (unless AllowedMentions forbids it).
var broadcast = []string{"channel", "here", "everyone"}

// Neutralize makes mass mentions in text inert for platform p, keeping the
// text readable; mentions of single users are left alone.
//
// Slack: the special mentions <!channel>, <!here>, <!everyone>, <!group>
// and <!subteam^ID> (with or without a |label) are replaced by what Slack
// would display, @channel, @here, … or @label for a user group, with a
// zero-width space after the @; a <!name that is not closed gets the zero
// width space after the <! instead. Then the plain words @channel, @here
// and @everyone get a zero-width space after the @, because Slack turns them
// into pings when a message is posted with link_names. Other <!…> commands
// such as <!date^…> are left alone. The replacement contains no < or &, so
// it is inert whether it is applied before or after SlackMrkdwn.
//
// Discord: @everyone and @here get a zero-width space after the @, and so do
// role mentions (<@&id> becomes <@\u200b&id>), since each can ping many
// members. Posts should still carry an empty AllowedMentions; this is the
// second line of defence, and it also protects text quoted back to people.
//
// Plain: both of the above.
//
// Matching is ASCII case-insensitive, and nothing is excluded: a mention
// inside a code span is neutralised too (the zero-width space is invisible
// but is copied along with the code).
func Neutralize(text string, p Platform) string {
	if p == Slack || p == Plain {
		text = neutralizeSlackSpecial(text)
	}
	words := broadcast
	if p == Discord {
		words = []string{"everyone", "here"}
	}
	return neutralizeAt(text, words, p != Slack)
}

// NeutralizeName makes a name Baton shows on platform p inert and honest: an
// uploaded file's name, or a path naming one. It is Neutralize for text
// that must stay on one line and read as it is stored:
//
//   - control characters (C0, DEL, C1, and the line and paragraph
//     separators U+2028 and U+2029) become a space, so that a name cannot
//     start a new line of a message, a log or a terminal;
//   - the Unicode bidirectional controls (U+061C, U+200E, U+200F,
//     U+202A–U+202E, U+2066–U+2069) are removed, so that
//     "report\u202egnp.exe" cannot show as "reportexe.png";
//   - invalid UTF-8 becomes U+FFFD;
//   - surrounding spaces are trimmed, and then mass mentions are made inert
//     as Neutralize does for p.
//
// The result may be empty (a name of nothing but controls); the caller
// picks a name then.
func NeutralizeName(name string, p Platform) string {
	var b strings.Builder
	b.Grow(len(name))
	for i := 0; i < len(name); {
		r, n := utf8.DecodeRuneInString(name[i:])
		i += n
		switch {
		case r == utf8.RuneError && n == 1:
			b.WriteRune(utf8.RuneError)
		case r < 0x20 || r >= 0x7f && r <= 0x9f || r == '\u2028' || r == '\u2029':
			b.WriteByte(' ')
		case isBidiControl(r):
		default:
			b.WriteRune(r)
		}
	}
	return Neutralize(strings.TrimSpace(b.String()), p)
}

// isBidiControl reports whether r is one of the invisible characters that
// change the direction text is displayed in.
func isBidiControl(r rune) bool {
	return r == '\u061c' || r == '\u200e' || r == '\u200f' ||
		r >= '\u202a' && r <= '\u202e' || r >= '\u2066' && r <= '\u2069'
}

// neutralizeSlackSpecial rewrites <!name…> special mentions. It repeats
// until nothing changes, since a label could in principle complete a new
// token with the text after it; each round removes a '<', so it ends.
func neutralizeSlackSpecial(text string) string {
	for {
		out, changed := slackSpecialOnce(text)
		if !changed {
			return out
		}
		text = out
	}
}

func slackSpecialOnce(text string) (string, bool) {
	var b strings.Builder
	changed := false
	i := 0
	for {
		j := strings.Index(text[i:], "<!")
		if j < 0 {
			break
		}
		j += i
		name := specialName(text[j+2:])
		if name == "" {
			b.WriteString(text[i : j+2])
			i = j + 2
			continue
		}
		b.WriteString(text[i:j])
		changed = true
		rest := text[j+2+len(name):]
		end := strings.IndexAny(rest, "<>\n")
		if end < 0 || rest[end] != '>' {
			// Not a complete token: break it up where it starts.
			b.WriteString("<!" + zwsp)
			i = j + 2
			continue
		}
		inner := rest[:end] // ^id and/or |label
		label := strings.ToLower(name)
		if k := strings.IndexByte(inner, '|'); k >= 0 {
			if l := strings.TrimPrefix(strings.TrimSpace(inner[k+1:]), "@"); l != "" {
				label = l
			}
		} else if strings.HasPrefix(inner, "^") && label == "subteam" {
			label = inner[1:]
		}
		b.WriteString("@" + zwsp + label)
		i = j + 2 + len(name) + end + 1
	}
	if !changed {
		return text, false
	}
	b.WriteString(text[i:])
	return b.String(), true
}

// specialName returns the special-mention name s starts with (as written),
// if it is one of slackSpecial and not followed by a letter or digit.
func specialName(s string) string {
	for _, name := range slackSpecial {
		if len(s) >= len(name) && asciiEqualFold(s[:len(name)], name) && !isASCIIAlnumAt(s, len(name)) {
			return s[:len(name)]
		}
	}
	return ""
}

func isASCIIAlnumAt(s string, i int) bool {
	if i >= len(s) {
		return false
	}
	c := s[i]
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// neutralizeAt inserts a zero-width space after every @ followed by one of
// words (ASCII case-insensitive), and, when roles is set, after the @ of
// every <@& role mention. Inserting only separates characters, so it cannot
// create a new token.
func neutralizeAt(text string, words []string, roles bool) string {
	var b strings.Builder
	last := 0
	for i := 0; i < len(text); i++ {
		if text[i] != '@' {
			continue
		}
		rest := text[i+1:]
		hit := roles && i > 0 && text[i-1] == '<' && strings.HasPrefix(rest, "&")
		for _, w := range words {
			if !hit && len(rest) >= len(w) && asciiEqualFold(rest[:len(w)], w) {
				hit = true
			}
		}
		if hit {
			b.WriteString(text[last : i+1])
			b.WriteString(zwsp)
			last = i + 1
		}
	}
	if last == 0 {
		return text
	}
	b.WriteString(text[last:])
	return b.String()
}

// asciiEqualFold is strings.EqualFold for ASCII letters only: platforms do
// not read a Kelvin sign or a long s as a k or an s.
func asciiEqualFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		if lowerASCII(a[i]) != lowerASCII(b[i]) {
			return false
		}
	}
	return true
}

func lowerASCII(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}
