package discord

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/bwmarrin/discordgo"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/chat"
	"github.com/baton-bot/baton/core/chattext"
)

var (
	_ chat.Poster       = (*Adapter)(nil)
	_ chat.ButtonPoster = (*Adapter)(nil)
	_ chat.KeyedPoster  = (*Adapter)(nil)
)

// emoji maps Baton's platform-neutral short names to the Unicode emoji
// Discord reacts with.
var emoji = map[string]string{
	chat.EmojiClaimed: "👀",
	chat.EmojiDone:    "✅",
	chat.EmojiFailed:  "❌",
}

// shortName is the reverse of emoji.
func shortName(unicode string) string {
	for k, v := range emoji {
		if v == unicode {
			return k
		}
	}
	return ""
}

// noPings lets a post mention nobody: not @everyone, not a role, not a
// user. Neutralize is the second line of defence for quoted text.
func noPings() *discordgo.MessageAllowedMentions {
	return &discordgo.MessageAllowedMentions{Parse: []discordgo.AllowedMentionType{}}
}

// Discord error codes Baton treats as permanent delivery failures.
const (
	codeUnknownChannel     = 10003
	codeUnknownMessage     = 10008
	codeMissingAccess      = 50001
	codeMissingPermissions = 50013
	codeThreadArchived     = 50083
)

// Post implements chat.Poster: text in the thread's channel (the thread
// itself, or the DM channel), pinging nobody.
func (a *Adapter) Post(ctx context.Context, thread core.ThreadRef, text string) (string, error) {
	return a.send(ctx, thread, text, nil, "")
}

// PostButtons implements chat.ButtonPoster: Post, with buttons under the
// text (components; see components).
func (a *Adapter) PostButtons(ctx context.Context, thread core.ThreadRef, text string, buttons []chat.Button) (string, error) {
	return a.send(ctx, thread, text, a.components(buttons), "")
}

// PostKeyed implements chat.KeyedPoster: PostButtons (Post, without
// buttons) with key as the message's nonce, enforced: Discord answers a
// post whose nonce the bot used in the channel within the past few
// minutes with the message posted then, and posts nothing. A key longer
// than Discord's 25 characters is not sent.
func (a *Adapter) PostKeyed(ctx context.Context, thread core.ThreadRef, text string, buttons []chat.Button, key string) (string, error) {
	if utf8.RuneCountInString(key) > maxNonce {
		key = ""
	}
	return a.send(ctx, thread, text, a.components(buttons), key)
}

// maxNonce is the most characters a message's nonce may hold.
const maxNonce = 25

// keyedSend is a message with a nonce, which discordgo's MessageSend
// does not carry.
type keyedSend struct {
	*discordgo.MessageSend
	Nonce        string `json:"nonce,omitempty"`
	EnforceNonce bool   `json:"enforce_nonce,omitempty"`
}

// send posts text with components (nil: none) in the thread's channel,
// with nonce ("": none) enforced, reopening the thread once when it is
// archived.
func (a *Adapter) send(ctx context.Context, thread core.ThreadRef, text string, components []discordgo.MessageComponent, nonce string) (string, error) {
	ch := postChannel(thread)
	send := &discordgo.MessageSend{Content: chattext.Neutralize(text, chattext.Discord), AllowedMentions: noPings(), Components: components}
	post := func() (*discordgo.Message, error) {
		if nonce == "" {
			return a.s.ChannelMessageSendComplex(ch, send, discordgo.WithContext(ctx))
		}
		// What ChannelMessageSendComplex sends, nonce added.
		endpoint := discordgo.EndpointChannelMessages(ch)
		body, err := a.s.RequestWithBucketID(http.MethodPost, endpoint, keyedSend{MessageSend: send, Nonce: nonce, EnforceNonce: true},
			endpoint, discordgo.WithContext(ctx))
		if err != nil {
			return nil, err
		}
		var m discordgo.Message
		if err := json.Unmarshal(body, &m); err != nil {
			return nil, fmt.Errorf("read the posted message: %w", err)
		}
		return &m, nil
	}
	m, err := post()
	if hasCode(err, codeThreadArchived) && a.unarchive(ctx, ch) {
		m, err = post()
	}
	if err != nil {
		return "", a.deliveryErr("post", ch, err)
	}
	return m.ID, nil
}

// unarchive reopens an archived thread so that Baton can post in it again;
// it reports whether that worked (a locked thread stays closed).
func (a *Adapter) unarchive(ctx context.Context, thread string) bool {
	_, err := a.s.ChannelEditComplex(thread, &discordgo.ChannelEdit{Archived: new(false)}, discordgo.WithContext(ctx))
	if err != nil {
		a.log.Warn("the task's thread is archived and Baton cannot reopen it (Manage Threads, or the thread is locked)", "thread", thread, "err", err)
		return false
	}
	return true
}

// hasCode reports whether err is Discord's JSON error code.
func hasCode(err error, code int) bool {
	var re *discordgo.RESTError
	return errors.As(err, &re) && re.Message != nil && re.Message.Code == code
}

// Update implements chat.Poster: it edits the text of one of the bot's
// messages, leaving its buttons as they are.
func (a *Adapter) Update(ctx context.Context, thread core.ThreadRef, msgID, text string) error {
	return a.edit(ctx, thread, msgID, text, nil)
}

// UpdateButtons implements chat.ButtonPoster: it edits the text and the
// buttons of one of the bot's messages; no buttons remove those it had.
func (a *Adapter) UpdateButtons(ctx context.Context, thread core.ThreadRef, msgID, text string, buttons []chat.Button) error {
	components := a.components(buttons)
	if components == nil {
		components = []discordgo.MessageComponent{} // sent as [], which clears them
	}
	return a.edit(ctx, thread, msgID, text, &components)
}

// edit replaces the text of message msgID, and its components unless
// components is nil.
func (a *Adapter) edit(ctx context.Context, thread core.ThreadRef, msgID, text string, components *[]discordgo.MessageComponent) error {
	ch := postChannel(thread)
	content := chattext.Neutralize(text, chattext.Discord)
	edit := discordgo.NewMessageEdit(ch, msgID)
	edit.Content = &content
	edit.AllowedMentions = noPings()
	edit.Components = components
	if _, err := a.s.ChannelMessageEditComplex(edit, discordgo.WithContext(ctx)); err != nil {
		return a.deliveryErr("edit message "+msgID, ch, err)
	}
	return nil
}

// Discord's limits on buttons.
const (
	maxCustomID   = 100 // characters of a button's custom_id
	maxLabel      = 80  // characters of a button's label
	buttonsPerRow = 5
	maxRows       = 5
)

// components lays buttons out as Discord's message components: action rows
// of up to five buttons (one row for Baton's three at most), each button's
// custom_id its Action, handed back when clicked. A button whose Action is
// longer than Discord's 100 characters would make Discord refuse the whole
// message: it is left out (and logged); the text names the commands that
// do the same. It returns nil when no button remains.
func (a *Adapter) components(buttons []chat.Button) []discordgo.MessageComponent {
	var rows []discordgo.MessageComponent
	var row discordgo.ActionsRow
	for _, b := range buttons {
		if b.Action == "" || utf8.RuneCountInString(b.Action) > maxCustomID {
			a.log.Warn("a button is left out: its action is empty or longer than Discord's 100 characters", "chars", utf8.RuneCountInString(b.Action))
			continue
		}
		if len(rows) == maxRows {
			a.log.Warn("a button is left out: Discord shows five rows of buttons at most", "action", b.Action)
			continue
		}
		label := b.Label
		if label == "" {
			label = b.Action
		}
		row.Components = append(row.Components, discordgo.Button{
			CustomID: b.Action, Label: cutLabel(label), Style: buttonStyle(b.Style),
		})
		if len(row.Components) == buttonsPerRow {
			rows, row = append(rows, row), discordgo.ActionsRow{}
		}
	}
	if len(row.Components) > 0 && len(rows) < maxRows {
		rows = append(rows, row)
	}
	return rows
}

// buttonStyle maps a chat.Button's style to Discord's.
func buttonStyle(style string) discordgo.ButtonStyle {
	switch style {
	case chat.StylePrimary:
		return discordgo.PrimaryButton
	case chat.StyleDanger:
		return discordgo.DangerButton
	}
	return discordgo.SecondaryButton
}

// cutLabel cuts a label to Discord's 80 characters.
func cutLabel(s string) string {
	if utf8.RuneCountInString(s) <= maxLabel {
		return s
	}
	r := []rune(s)
	return string(r[:maxLabel-1]) + "…"
}

// React implements chat.Poster. The message that started a thread lives in
// the parent channel (its id is the thread's id); every other message of a
// task lives in the thread.
func (a *Adapter) React(ctx context.Context, thread core.ThreadRef, msgID, name string, remove bool) error {
	e, ok := emoji[name]
	if !ok {
		return fmt.Errorf("react %q: %w: no such emoji", name, chat.ErrPermanent)
	}
	ch := postChannel(thread)
	if msgID == thread.Thread && thread.Channel != "" {
		ch = thread.Channel
	}
	var err error
	if remove {
		err = a.s.MessageReactionRemove(ch, msgID, e, "@me", discordgo.WithContext(ctx))
	} else {
		err = a.s.MessageReactionAdd(ch, msgID, e, discordgo.WithContext(ctx))
	}
	if err != nil {
		return a.deliveryErr("react "+name+" on "+msgID, ch, err)
	}
	return nil
}

// Upload implements chat.Poster: the file as an attachment of a new message
// carrying comment.
func (a *Adapter) Upload(ctx context.Context, thread core.ThreadRef, name string, r io.Reader, size int64, comment string) (string, error) {
	ch := postChannel(thread)
	m, err := a.s.ChannelMessageSendComplex(ch, &discordgo.MessageSend{
		Content:         chattext.Neutralize(comment, chattext.Discord),
		Files:           []*discordgo.File{{Name: name, Reader: r}},
		AllowedMentions: noPings(),
	}, discordgo.WithContext(ctx))
	if err != nil {
		return "", a.deliveryErr("upload "+name, ch, err)
	}
	return m.ID, nil
}

// Limits implements chat.Poster: Discord takes 2,000 characters a message;
// its rate limits are honoured by discordgo's buckets and by 429s.
func (a *Adapter) Limits() chat.Limits {
	return chat.Limits{Post: 2000, MaxParts: 4}
}

// postChannel is the channel a thread's posts go to: the thread (a Discord
// thread is a channel), or the DM channel.
func postChannel(t core.ThreadRef) string {
	if t.Thread != "" {
		return t.Thread
	}
	return t.Channel
}

// deliveryErr translates discordgo's errors: a rate limit becomes a
// *chat.RateLimitedError, a channel or permission Baton cannot fix wraps
// chat.ErrPermanent and is logged so that an operator can act.
func (a *Adapter) deliveryErr(op, channel string, err error) error {
	var rl *discordgo.RateLimitError
	if errors.As(err, &rl) && rl.RateLimit != nil && rl.TooManyRequests != nil {
		return &chat.RateLimitedError{After: rl.RetryAfter, Err: fmt.Errorf("discord %s: %w", op, err)}
	}
	var re *discordgo.RESTError
	if !errors.As(err, &re) || re.Response == nil {
		return fmt.Errorf("discord %s: %w", op, err)
	}
	status := re.Response.StatusCode
	if status == http.StatusTooManyRequests {
		return &chat.RateLimitedError{After: retryAfter(re.Response.Header), Err: fmt.Errorf("discord %s: %w", op, err)}
	}
	code := 0
	if re.Message != nil {
		code = re.Message.Code
	}
	switch {
	case code == codeMissingPermissions:
		a.log.Error("Baton lacks a permission in a Discord channel: give its role View Channels, Send Messages, Send Messages in Threads, Create Public Threads, Read Message History, Add Reactions and Attach Files there",
			"op", op, "channel", channel, "code", code)
	case code == codeMissingAccess:
		a.log.Error("Baton cannot see a Discord channel (Missing Access): give its role View Channels and Read Message History there, or invite it to the thread",
			"op", op, "channel", channel, "code", code)
	case code == codeUnknownChannel:
		a.log.Warn("the Discord channel is gone; the message is dropped", "op", op, "channel", channel, "code", code)
	case code == codeUnknownMessage:
		a.log.Warn("the Discord message is gone; the change is dropped", "op", op, "channel", channel, "code", code)
	case status == http.StatusForbidden || status == http.StatusNotFound || status == http.StatusRequestEntityTooLarge:
		a.log.Warn("Discord refused a delivery for good", "op", op, "channel", channel, "status", status, "code", code)
	default:
		return fmt.Errorf("discord %s: %w", op, err)
	}
	return fmt.Errorf("discord %s: %w: %w", op, chat.ErrPermanent, err)
}

// retryAfter reads Discord's Retry-After (seconds) or X-RateLimit-Reset-After
// headers; zero when neither is there.
func retryAfter(h http.Header) time.Duration {
	for _, k := range []string{"Retry-After", "X-RateLimit-Reset-After"} {
		if f, err := strconv.ParseFloat(h.Get(k), 64); err == nil && f > 0 {
			return time.Duration(f * float64(time.Second))
		}
	}
	return 0
}
