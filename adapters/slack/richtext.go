package slack

import (
	"strconv"
	"strings"

	"github.com/slack-go/slack"
)

// escape writes text as Slack's markup escapes it in a message's text.
var escape = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

// richText writes a message's rich_text blocks in Slack's markup, the
// form of a message's text field (<@U1>, <url|label>, &amp;), so that
// chattext.Readable reads both alike. Slack sends blocks alone when an app
// or a workflow posts, and the text then is empty. Elements it does not
// know are skipped; "" when there is no rich text.
func richText(blocks slack.Blocks) string {
	var b strings.Builder
	for _, bl := range blocks.BlockSet {
		rt, ok := bl.(*slack.RichTextBlock)
		if !ok || rt == nil {
			continue
		}
		for _, el := range rt.Elements {
			writeRich(&b, el)
		}
	}
	return strings.TrimSpace(b.String())
}

func writeRich(b *strings.Builder, el slack.RichTextElement) {
	switch e := el.(type) {
	case *slack.RichTextSection:
		writeSection(b, e.Elements)
	case *slack.RichTextList:
		newline(b)
		for i, item := range e.Elements {
			b.WriteString(strings.Repeat("  ", max(0, min(e.Indent, 8))))
			if e.Style == slack.RTEListOrdered {
				b.WriteString(strconv.Itoa(e.Offset+i+1) + ". ")
			} else {
				b.WriteString("- ")
			}
			if s, ok := item.(*slack.RichTextSection); ok {
				writeSection(b, s.Elements)
			}
			newline(b)
		}
	case *slack.RichTextQuote:
		var q strings.Builder
		writeSection(&q, e.Elements)
		newline(b)
		for line := range strings.SplitSeq(strings.TrimRight(q.String(), "\n"), "\n") {
			b.WriteString("&gt; " + line + "\n")
		}
	case *slack.RichTextPreformatted:
		newline(b)
		b.WriteString("```\n")
		writeSection(b, e.Elements)
		newline(b)
		b.WriteString("```\n")
	}
}

// newline ends the line written so far, if any.
func newline(b *strings.Builder) {
	if s := b.String(); s != "" && !strings.HasSuffix(s, "\n") {
		b.WriteByte('\n')
	}
}

func writeSection(b *strings.Builder, els []slack.RichTextSectionElement) {
	for _, el := range els {
		switch e := el.(type) {
		case *slack.RichTextSectionTextElement:
			if e.Style != nil && e.Style.Code {
				b.WriteString("`" + escape.Replace(e.Text) + "`")
			} else {
				b.WriteString(escape.Replace(e.Text))
			}
		case *slack.RichTextSectionUserElement:
			b.WriteString("<@" + e.UserID + ">")
		case *slack.RichTextSectionChannelElement:
			b.WriteString("<#" + e.ChannelID + ">")
		case *slack.RichTextSectionUserGroupElement:
			b.WriteString("<!subteam^" + e.UsergroupID + ">")
		case *slack.RichTextSectionBroadcastElement:
			b.WriteString("<!" + e.Range + ">")
		case *slack.RichTextSectionLinkElement:
			url := strings.ReplaceAll(escape.Replace(e.URL), "|", "%7C")
			if e.Text == "" {
				b.WriteString("<" + url + ">")
			} else {
				b.WriteString("<" + url + "|" + escape.Replace(e.Text) + ">")
			}
		case *slack.RichTextSectionEmojiElement:
			b.WriteString(":" + e.Name + ":")
		case *slack.RichTextSectionDateElement:
			b.WriteString("<!date^" + strconv.FormatInt(int64(e.Timestamp), 10) + "^{date}>")
		}
	}
}
