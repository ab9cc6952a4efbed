package chattext

import (
	"strconv"
	"strings"
	"time"
)

// Refs says what the ids in a message's references name, for Readable. A
// nil lookup, or one that answers
// false, leaves the id in place: an unknown user stays @U123.
//
// The lookups are the caller's: Readable calls them once for each reference
// it meets, in order, and does nothing else that is not pure; a caller
// that asks the platform bounds and caches its own calls.
type Refs struct {
	User    func(id string) (name string, ok bool) // <@U123>, <@123>, <@!123>
	Role    func(id string) (name string, ok bool) // <@&123> (Discord)
	Channel func(id string) (name string, ok bool) // <#C123>, <#123> without a name
}

// unescape decodes the three entities Slack escapes, in one pass, so that
// a typed "&lt;" (sent as "&amp;lt;") stays "&lt;".
var unescape = strings.NewReplacer("&amp;", "&", "&lt;", "<", "&gt;", ">")

// Readable rewrites the text of a message received on platform p (Slack
// or Discord) as people read it, for
// the model and the task's title: user mentions become @name (<@U1>,
// <@1>, <@!1>, <@U1|label>), role mentions @role-name (<@&1>), channel
// links #name (<#C1|name>, <#1>), special mentions @here, @channel and
// @everyone (<!here>, <!channel>, <!everyone>), user groups their handle
// (<!subteam^S1|@team>), links "label (url)" (<url|label>) or the URL
// (<url>), custom emoji :name: (<:name:1>, <a:name:1>), slash-command
// mentions /name (</name:1>), and dates and timestamps (<!date^…>,
// <t:…>, <t:…:R>) an ISO 8601 time in UTC. On Slack, which sends the
// text's &, < and > as &amp;, &lt; and &gt;, those are decoded, once;
// Discord sends text as typed. Text of another platform is returned as it
// is.
//
// Anything else between < and >, and a < without its >, is left as text:
// Readable never fails and never drops what it does not understand. It works
// in one pass, in time linear in the text (plus the lookups).
func Readable(p Platform, text string, refs Refs) string {
	dec := func(s string) string { return s }
	switch p {
	case Slack:
		dec = unescape.Replace
	case Discord:
	default:
		return text
	}
	var b strings.Builder
	b.Grow(len(text))
	for {
		i := strings.IndexByte(text, '<')
		if i < 0 {
			b.WriteString(dec(text))
			return b.String()
		}
		b.WriteString(dec(text[:i]))
		e := strings.IndexAny(text[i+1:], "<>")
		if e < 0 || text[i+1+e] != '>' {
			b.WriteString(dec("<"))
			text = text[i+1:]
			continue
		}
		inner := text[i+1 : i+1+e]
		text = text[i+e+2:]
		if out, ok := readableRef(inner, refs, dec); ok {
			b.WriteString(out)
		} else {
			b.WriteString("<" + dec(inner) + ">")
		}
	}
}

// readableRef rewrites the reference inner (what stood between < and >); ok
// is false when inner is not one.
func readableRef(inner string, refs Refs, dec func(string) string) (string, bool) {
	target, label, hasLabel := strings.Cut(inner, "|")
	label = dec(label)
	switch {
	case strings.HasPrefix(target, "@&"):
		id := target[2:]
		if !isID(id) {
			return "", false
		}
		if name, ok := lookup(refs.Role, id); ok {
			return "@" + name, true
		}
		return "@&" + id, true
	case strings.HasPrefix(target, "@"):
		id := strings.TrimPrefix(target[1:], "!")
		if !isID(id) {
			return "", false
		}
		if name, ok := lookup(refs.User, id); ok {
			return "@" + name, true
		}
		if hasLabel && label != "" {
			return "@" + strings.TrimPrefix(label, "@"), true
		}
		return "@" + id, true
	case strings.HasPrefix(target, "#"):
		id := target[1:]
		if !isID(id) {
			return "", false
		}
		if hasLabel && label != "" {
			return "#" + label, true
		}
		if name, ok := lookup(refs.Channel, id); ok {
			return "#" + name, true
		}
		return "#" + id, true
	case strings.HasPrefix(target, "!"):
		return special(target[1:], label, hasLabel)
	case strings.HasPrefix(target, "t:"):
		return timestamp(target[2:])
	case strings.HasPrefix(target, ":"), strings.HasPrefix(target, "a:"):
		parts := strings.Split(target, ":")
		if len(parts) == 3 && parts[1] != "" && isDigits(parts[2]) && !hasLabel {
			return ":" + parts[1] + ":", true
		}
		return "", false
	case strings.HasPrefix(target, "/"):
		name, id, ok := strings.Cut(target[1:], ":")
		if !ok || strings.TrimSpace(name) == "" || !isDigits(id) || hasLabel {
			return "", false
		}
		return "/" + name, true
	case safeURL(target):
		url := dec(target)
		switch {
		case !hasLabel || label == "" || label == url:
			return url, true
		case strings.TrimPrefix(url, "mailto:") == label:
			return label, true
		case stripScheme(url) == label:
			return url, true
		}
		return label + " (" + url + ")", true
	}
	return "", false
}

// special rewrites Slack's <!…> commands: here, channel, everyone, user
// groups and dates.
func special(cmd, label string, hasLabel bool) (string, bool) {
	name, arg, _ := strings.Cut(cmd, "^")
	switch name {
	case "here", "channel", "everyone":
		if arg != "" {
			return "", false
		}
		return "@" + name, true
	case "subteam":
		if !isID(arg) {
			return "", false
		}
		if hasLabel && label != "" {
			return "@" + strings.TrimPrefix(label, "@"), true
		}
		return "@" + arg, true
	case "date":
		ts, _, _ := strings.Cut(arg, "^")
		if t, ok := unixISO(ts); ok {
			return t, true
		}
		if hasLabel && label != "" {
			return label, true
		}
	}
	return "", false
}

// timestamp rewrites a Discord timestamp's "unix" or "unix:style".
func timestamp(s string) (string, bool) {
	ts, style, hasStyle := strings.Cut(s, ":")
	if hasStyle && (len(style) != 1 || !strings.Contains("tTdDfFR", style)) {
		return "", false
	}
	return unixISO(ts)
}

// unixISO formats a count of seconds since 1970 as RFC 3339 in UTC; ok
// is false unless it is one, in the years 0 to 9999.
func unixISO(s string) (string, bool) {
	if s == "" || len(s) > 14 || (!isDigits(s) && !(s[0] == '-' && isDigits(s[1:]))) {
		return "", false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < -62167219200 || n > 253402300799 {
		return "", false
	}
	return time.Unix(n, 0).UTC().Format(time.RFC3339), true
}

func lookup(f func(string) (string, bool), id string) (string, bool) {
	if f == nil {
		return "", false
	}
	name, ok := f(id)
	return name, ok && name != ""
}

// isID reports a platform id: Slack's (U123, C123, S123) or a Discord
// snowflake.
func isID(s string) bool {
	if s == "" || len(s) > 32 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z') {
			return false
		}
	}
	return true
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func stripScheme(u string) string {
	if _, rest, ok := strings.Cut(u, "://"); ok {
		return strings.TrimSuffix(rest, "/")
	}
	return u
}
