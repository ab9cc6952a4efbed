package slack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/chat"
	"github.com/baton-bot/baton/core/chattext"
	"github.com/slack-go/slack"
)

// Slack's limits as Baton uses them: a post's text stays within the 3,000
// characters a section may show, an edit within 3,800 bytes, and a
// channel gets about one post a second.
var limits = chat.Limits{Post: 3000, Update: 3800, MaxParts: 4, Every: time.Second}

// Poster delivers Baton's outbox to Slack threads through the Web API. It
// implements chat.Poster, chat.ButtonPoster, chat.KeyedPoster (a key in
// each message's metadata) and chat.DeliveryFinder (the key looked up in
// the thread), and is safe for concurrent use.
//
// Texts are Markdown: Post and Update make mass mentions inert and convert
// them to mrkdwn; Slack's own link parsing and @name linking are off, so
// nothing in a text can ping a channel.
type Poster struct {
	api     *slack.Client
	streams streams
	locale  string // of the assistant thread's status (Config.Locale)
}

var (
	_ chat.Poster         = (*Poster)(nil)
	_ chat.KeyedPoster    = (*Poster)(nil)
	_ chat.DeliveryFinder = (*Poster)(nil)
)

// NewPoster returns a Poster that calls the Web API at cfg.APIURL (Slack's
// own when empty) with cfg.BotToken.
func NewPoster(cfg Config) *Poster {
	return &Poster{api: newClient(cfg), streams: streams{now: time.Now}, locale: cfg.Locale}
}

func newClient(cfg Config) *slack.Client {
	opts := []slack.Option{}
	if cfg.APIURL != "" {
		u := cfg.APIURL
		if !strings.HasSuffix(u, "/") {
			u += "/"
		}
		opts = append(opts, slack.OptionAPIURL(u))
	}
	if cfg.HTTPClient != nil {
		opts = append(opts, slack.OptionHTTPClient(cfg.HTTPClient))
	}
	if cfg.AppToken != "" {
		opts = append(opts, slack.OptionAppLevelToken(cfg.AppToken))
	}
	return slack.New(cfg.BotToken, opts...)
}

// Limits implements chat.Poster.
func (p *Poster) Limits() chat.Limits { return limits }

// render turns Markdown into what Slack is sent.
func render(text string) string {
	return chattext.SlackMrkdwn(chattext.Neutralize(text, chattext.Slack))
}

// threadTS is the thread_ts to post with: none in a direct-message
// channel, which is one thread whose key is the channel itself.
func threadTS(thread core.ThreadRef) string {
	if thread.Thread == thread.Channel {
		return ""
	}
	return thread.Thread
}

// postOptions are a post's options for text in thread, then extra.
func postOptions(thread core.ThreadRef, text string, extra ...slack.MsgOption) []slack.MsgOption {
	opts := []slack.MsgOption{
		slack.MsgOptionText(text, false),
		slack.MsgOptionParse(false),
		slack.MsgOptionLinkNames(false),
		slack.MsgOptionDisableLinkUnfurl(),
	}
	if ts := threadTS(thread); ts != "" {
		opts = append(opts, slack.MsgOptionTS(ts))
	}
	return append(opts, extra...)
}

// minPost and minUpdate are the smallest sizes a text Slack refuses as
// too long is cut down to (characters of a post, bytes of an edit); a post
// refused even at minPost is uploaded as a file instead.
const (
	minPost   = 500
	minUpdate = 500
)

// Names of the file a post goes to when Slack refuses it in any size, and
// the line shared with it.
const (
	refusedName    = "message.md"
	refusedComment = "Slack refused this message as text, so here it is as a file."
)

// Post implements chat.Poster. The deliverer splits Markdown at
// Limits().Post characters; converting to mrkdwn can lengthen a part
// (escaped &, < and >), so a part whose rendering is still too long is
// posted as several messages. A message Slack refuses as too long or
// malformed (msg_too_long, invalid_blocks) is posted again in parts of
// half the size, down to minPost characters, and uploaded as a file when
// even that is refused. It returns the first message's ts.
func (p *Poster) Post(ctx context.Context, thread core.ThreadRef, text string) (string, error) {
	return p.postText(ctx, thread, text)
}

// postText is Post, each message posted with extra options.
func (p *Poster) postText(ctx context.Context, thread core.ThreadRef, text string, extra ...slack.MsgOption) (string, error) {
	var first string
	refused, err := p.post(ctx, thread, text, limits.Post, &first, extra)
	if refused {
		err = p.uploadRefused(ctx, thread, text, &first)
	}
	return first, err
}

// post posts the Markdown text in messages whose rendering holds at most
// limit characters, each with the extra options, setting *first to the
// id of the first one posted. It reports refused, having posted nothing,
// when Slack refuses the first message even cut to minPost characters; a
// later message refused so goes, with the rest of the text, into one
// file.
func (p *Poster) post(ctx context.Context, thread core.ThreadRef, text string, limit int, first *string, extra []slack.MsgOption) (refused bool, err error) {
	parts := splitRendered(text, limit)
	for i, part := range parts {
		out := render(part)
		_, ts, err := p.api.PostMessageContext(ctx, thread.Channel, postOptions(thread, out, extra...)...)
		if err == nil {
			if *first == "" {
				*first = ts
			}
			continue
		}
		if !refusedAsText(err) {
			return false, classify("chat.postMessage", err)
		}
		if smaller := min(limit, utf8.RuneCountInString(out)) / 2; smaller >= minPost {
			refused, err := p.post(ctx, thread, part, smaller, first, extra)
			if err != nil {
				return false, err
			}
			if !refused {
				continue
			}
		}
		if i == 0 {
			return true, nil
		}
		return false, p.uploadRefused(ctx, thread, strings.Join(parts[i:], "\n\n"), first)
	}
	return false, nil
}

// outboxEvent is the event_type of the metadata a keyed post carries
// (PostKeyed); its event_payload holds the key as outboxKeyField.
const (
	outboxEvent    = "baton_outbox"
	outboxKeyField = "key"
)

// keyed is the option that tags a message with key, as message metadata.
func keyed(key string) slack.MsgOption {
	return slack.MsgOptionMetadata(slack.SlackMetadata{EventType: outboxEvent, EventPayload: map[string]any{outboxKeyField: key}})
}

// PostKeyed implements chat.KeyedPoster: PostButtons (Post, without
// buttons), every message it posts carrying key as message metadata
// (event_type baton_outbox), which FindDelivered reads. A text Slack
// refuses as messages, and uploads as a file, carries no key.
func (p *Poster) PostKeyed(ctx context.Context, thread core.ThreadRef, text string, buttons []chat.Button, key string) (string, error) {
	if len(buttons) > 0 {
		return p.postButtons(ctx, thread, text, buttons, keyed(key))
	}
	return p.postText(ctx, thread, text, keyed(key))
}

// findPages bounds the pages of 200 messages FindDelivered reads: a
// post looked for is among a thread's last, but replies come oldest
// first, and a direct-message channel's history newest first.
const findPages = 20

// FindDelivered implements chat.DeliveryFinder: it reads the thread
// (conversations.replies; in a direct-message channel, which is one
// thread, its history: conversations.history) with the messages'
// metadata, and returns the earliest message whose baton_outbox metadata
// carries key. A thread longer than findPages pages is read no further:
// a post beyond them is not found.
func (p *Poster) FindDelivered(ctx context.Context, thread core.ThreadRef, key string) (string, bool, error) {
	var found string
	cursor := ""
	for range findPages {
		var msgs []slack.Message
		var more bool
		if ts := threadTS(thread); ts != "" {
			var err error
			msgs, more, cursor, err = p.api.GetConversationRepliesContext(ctx, &slack.GetConversationRepliesParameters{
				ChannelID: thread.Channel, Timestamp: ts, Cursor: cursor, Limit: 200, IncludeAllMetadata: true})
			if err != nil {
				return "", false, classify("conversations.replies", err)
			}
		} else {
			h, err := p.api.GetConversationHistoryContext(ctx, &slack.GetConversationHistoryParameters{
				ChannelID: thread.Channel, Cursor: cursor, Limit: 200, IncludeAllMetadata: true})
			if err != nil {
				return "", false, classify("conversations.history", err)
			}
			msgs, more, cursor = h.Messages, h.HasMore, h.ResponseMetaData.NextCursor
		}
		for _, m := range msgs {
			if m.Metadata.EventType != outboxEvent || m.Metadata.EventPayload[outboxKeyField] != key {
				continue
			}
			if found == "" || tsTime(m.Timestamp).Before(tsTime(found)) {
				found = m.Timestamp
			}
		}
		// The posts of one key are neighbours: once a page has one, the
		// next page holds none earlier than those seen.
		if found != "" || !more || cursor == "" {
			break
		}
	}
	return found, found != "", nil
}

// uploadRefused uploads a text Slack refuses as messages.
func (p *Poster) uploadRefused(ctx context.Context, thread core.ThreadRef, text string, first *string) error {
	id, err := p.Upload(ctx, thread, refusedName, strings.NewReader(text), int64(len(text)), refusedComment)
	if err != nil {
		return err
	}
	if *first == "" {
		*first = id
	}
	return nil
}

// splitRendered splits Markdown text into parts whose rendering holds at
// most limit characters, each part rendered on its own. Rendering
// lengthens a text by a bounded factor, so splitting a part that renders
// too long at ever smaller sizes ends.
func splitRendered(text string, limit int) []string {
	if utf8.RuneCountInString(render(text)) <= limit {
		return []string{text}
	}
	var out []string
	var cut func(s string, size int)
	cut = func(s string, size int) {
		for _, part := range chattext.Split(s, size) {
			if size <= 16 || utf8.RuneCountInString(render(part)) <= limit {
				out = append(out, part) // at 16, Slack will judge
				continue
			}
			cut(part, size/2)
		}
	}
	cut(text, limit)
	return out
}

// refusedAsText reports Slack's refusals of a text that a smaller one may
// pass.
func refusedAsText(err error) bool {
	switch slackError(err) {
	case "msg_too_long", "invalid_blocks":
		return true
	}
	return false
}

// Update implements chat.Poster: chat.update of message msgID, cut to
// Limits().Update bytes once rendered. A text Slack refuses as too long
// or malformed is cut to half the size and sent again, down to minUpdate
// bytes.
func (p *Poster) Update(ctx context.Context, thread core.ThreadRef, msgID, text string) error {
	return p.update(ctx, thread, msgID, text, nil)
}

// update edits message msgID as Update does; with blocks set, the edit
// carries the blocks it returns for the text as cut (which replace the
// blocks the message had).
func (p *Poster) update(ctx context.Context, thread core.ThreadRef, msgID, text string, blocks func(out string) []slack.Block) error {
	out := render(text)
	for limit := limits.Update; ; {
		out = cutBytes(out, limit)
		opts := []slack.MsgOption{slack.MsgOptionText(out, false), slack.MsgOptionParse(false), slack.MsgOptionLinkNames(false)}
		if blocks != nil {
			opts = append(opts, slack.MsgOptionBlocks(blocks(out)...))
		}
		_, _, _, err := p.api.UpdateMessageContext(ctx, thread.Channel, msgID, opts...)
		if err == nil {
			return nil
		}
		limit = min(limit, len(out)) / 2
		if !refusedAsText(err) || limit < minUpdate {
			return classify("chat.update", err)
		}
	}
}

// React implements chat.Poster. Adding a reaction that is there already,
// or removing one that is not, succeeds.
func (p *Poster) React(ctx context.Context, thread core.ThreadRef, msgID, emoji string, remove bool) error {
	ref := slack.NewRefToMessage(thread.Channel, msgID)
	if remove {
		err := p.api.RemoveReactionContext(ctx, emoji, ref)
		if err != nil && slackError(err) != "no_reaction" {
			return classify("reactions.remove", err)
		}
		return nil
	}
	err := p.api.AddReactionContext(ctx, emoji, ref)
	if err != nil && slackError(err) != "already_reacted" {
		return classify("reactions.add", err)
	}
	return nil
}

// Upload implements chat.Poster with files.getUploadURLExternal and
// files.completeUploadExternal, sharing the file into the thread with
// comment. It returns the file's id (Slack answers no message ts).
func (p *Poster) Upload(ctx context.Context, thread core.ThreadRef, name string, r io.Reader, size int64, comment string) (string, error) {
	if size <= 0 {
		// Slack refuses empty uploads, and the size is announced first.
		b, err := io.ReadAll(r)
		if err != nil {
			return "", fmt.Errorf("read upload %s: %w", name, err)
		}
		if len(b) == 0 {
			return "", fmt.Errorf("%w: upload %s: the file is empty", chat.ErrPermanent, name)
		}
		r, size = strings.NewReader(string(b)), int64(len(b))
	}
	f, err := p.api.UploadFileContext(ctx, slack.UploadFileParameters{
		Reader:          r,
		FileSize:        int(size),
		Filename:        name,
		Title:           name,
		InitialComment:  render(comment),
		Channel:         thread.Channel,
		ThreadTimestamp: threadTS(thread),
	})
	if err != nil {
		return "", classify("upload "+name, err)
	}
	return f.ID, nil
}

// permanentErrors are Slack error codes that retrying cannot fix.
var permanentErrors = map[string]string{
	"channel_not_found":   "the channel does not exist or the bot cannot see it",
	"not_in_channel":      "the bot is not a member of the channel",
	"is_archived":         "the channel is archived",
	"invalid_auth":        "the bot token is invalid",
	"not_authed":          "no bot token was sent",
	"account_inactive":    "the bot's token was revoked or its workspace deleted",
	"token_revoked":       "the bot token was revoked",
	"message_not_found":   "the message no longer exists",
	"cant_update_message": "the message cannot be edited by the bot",
	"msg_too_long":        "the message is longer than Slack accepts",
	"invalid_blocks":      "Slack refused the message's blocks",
	"no_text":             "the message has no text",
	"invalid_name":        "the emoji name is not valid",
	"missing_scope":       "the bot token lacks a scope the call needs",
	"restricted_action":   "the workspace does not allow the bot to post here",
}

// classify translates a Web API error: a rate limit into
// *chat.RateLimitedError, the errors retrying cannot fix into ones
// wrapping chat.ErrPermanent; the rest stay retryable.
func classify(op string, err error) error {
	var rl *slack.RateLimitedError
	if errors.As(err, &rl) {
		return &chat.RateLimitedError{After: rl.RetryAfter, Err: fmt.Errorf("%s: %w", op, err)}
	}
	code := slackError(err)
	if why, ok := permanentErrors[code]; ok {
		return fmt.Errorf("%s: %s (%s): %w", op, why, code, chat.ErrPermanent)
	}
	return fmt.Errorf("%s: %w", op, err)
}

// slackError returns the error code of a Web API error answer, or "".
func slackError(err error) string {
	var v slack.SlackErrorResponse
	if errors.As(err, &v) {
		return v.Err
	}
	var p *slack.SlackErrorResponse
	if errors.As(err, &p) {
		return p.Err
	}
	return ""
}

// cutBytes cuts s to at most n bytes on a character boundary, without
// leaving half of an HTML entity (&amp;) at the end.
func cutBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	n -= len(ellipsis)
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return trimTail(s[:n]) + ellipsis
}

// cutRunes cuts s to at most n characters as cutBytes cuts bytes.
func cutRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	i := 0
	for range n - utf8.RuneCountInString(ellipsis) {
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
	}
	return trimTail(s[:i]) + ellipsis
}

// ellipsis ends a text cut short.
const ellipsis = "…"

// trimTail removes what a cut left half of at the end of s: an HTML
// entity (&amp;), a link or a mention.
func trimTail(s string) string {
	if i := strings.LastIndexByte(s, '&'); i >= 0 && !strings.Contains(s[i:], ";") {
		s = s[:i]
	}
	if i := strings.LastIndexByte(s, '<'); i >= 0 && !strings.Contains(s[i:], ">") {
		s = s[:i] // half a link or mention
	}
	return s
}
