package slack

import (
	"context"
	"strconv"
	"unicode/utf8"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/chat"
	"github.com/slack-go/slack"
)

var _ chat.ButtonPoster = (*Poster)(nil)

// Block Kit's limits as Baton uses them: a section's text, a button's
// label, and the elements of an actions block.
const (
	maxSection = 3000
	maxLabel   = 75
	maxButtons = 25
)

// Ids of the blocks Baton sends. A button's action_id is actionPrefix and
// its index; what it does travels in its value (chat.Button.Action).
const (
	textBlockID    = "baton_text"
	actionsBlockID = "baton_actions"
	actionPrefix   = "baton_"
)

// PostButtons implements chat.ButtonPoster: chat.postMessage with the text
// rendered as Post renders it, in a section block (cut to the 3,000
// characters a section holds) above an actions block with the buttons, and
// in full as the message's text, which notifications and clients without
// blocks show. When Slack refuses the blocks as too long or malformed, the
// section is cut to half the size and sent again, down to minPost
// characters; then the text is posted without buttons (Post), its words
// naming the commands that do what the buttons do.
func (p *Poster) PostButtons(ctx context.Context, thread core.ThreadRef, text string, buttons []chat.Button) (string, error) {
	return p.postButtons(ctx, thread, text, buttons)
}

// postButtons is PostButtons, each message posted with extra options.
func (p *Poster) postButtons(ctx context.Context, thread core.ThreadRef, text string, buttons []chat.Button, extra ...slack.MsgOption) (string, error) {
	if len(buttons) == 0 {
		return p.postText(ctx, thread, text, extra...)
	}
	out := render(text)
	for limit := maxSection; limit >= minPost; limit = min(limit, utf8.RuneCountInString(out)) / 2 {
		opts := append(postOptions(thread, out, extra...), slack.MsgOptionBlocks(blocks(out, limit, buttons)...))
		_, ts, err := p.api.PostMessageContext(ctx, thread.Channel, opts...)
		if err == nil {
			return ts, nil
		}
		if !refusedAsText(err) {
			return "", classify("chat.postMessage", err)
		}
	}
	return p.postText(ctx, thread, text, extra...)
}

// UpdateButtons implements chat.ButtonPoster: chat.update of message msgID
// as Update does, with the blocks PostButtons sends. Without buttons the
// blocks are the section alone, so that the buttons the message had go.
func (p *Poster) UpdateButtons(ctx context.Context, thread core.ThreadRef, msgID, text string, buttons []chat.Button) error {
	return p.update(ctx, thread, msgID, text, func(out string) []slack.Block { return blocks(out, maxSection, buttons) })
}

// blocks are a message's blocks: the rendered text out in a section, cut
// to limit characters, and an actions block with the buttons, when there
// are any. Texts are verbatim: Slack links and mentions nothing in them
// by itself, as parse=none does for a message's text.
func blocks(out string, limit int, buttons []chat.Button) []slack.Block {
	section := slack.NewSectionBlock(slack.NewTextBlockObject(slack.MarkdownType, cutRunes(out, limit), false, true),
		nil, nil, slack.SectionBlockOptionBlockID(textBlockID))
	if len(buttons) == 0 {
		return []slack.Block{section}
	}
	els := make([]slack.BlockElement, 0, min(len(buttons), maxButtons))
	for i, b := range buttons[:min(len(buttons), maxButtons)] {
		label := b.Label
		if label == "" {
			label = b.Action
		}
		e := slack.NewButtonBlockElement(actionPrefix+strconv.Itoa(i), b.Action,
			slack.NewTextBlockObject(slack.PlainTextType, cutRunes(label, maxLabel), true, false))
		switch b.Style {
		case chat.StylePrimary:
			e.WithStyle(slack.StylePrimary)
		case chat.StyleDanger:
			e.WithStyle(slack.StyleDanger)
		}
		els = append(els, e)
	}
	return []slack.Block{section, slack.NewActionBlock(actionsBlockID, els...)}
}
