package discord

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/bwmarrin/discordgo"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/chat"
	"github.com/baton-bot/baton/core/chattext"
)

// codeThreadExists is Discord's answer when a thread was already created
// from the message (a repeated delivery): its id is the message's.
const codeThreadExists = 160004

// threadArchive is how long, in minutes, a task's thread stays open without
// activity (one day).
const threadArchive = 1440

func (a *Adapter) onMessage(_ *discordgo.Session, e *discordgo.MessageCreate) {
	bot := a.botUser()
	if !a.wanted(e.Message, bot) {
		return
	}
	m := e.Message
	a.queue(m.ChannelID, func(ctx context.Context) { a.message(ctx, m, bot) })
}

// wanted reports whether m was written by someone Baton listens to: not
// the bot itself (user id bot), not Discord's system user, not another
// bot when IgnoreBots is set, and not a notice (a thread created, a pin, a
// join, …).
func (a *Adapter) wanted(m *discordgo.Message, bot string) bool {
	switch {
	case m == nil || m.Author == nil || bot == "" || m.Author.ID == bot:
		return false // the bot's own messages never count
	case m.Author.System:
		return false
	case (m.Author.Bot || m.WebhookID != "") && a.cfg.IgnoreBots:
		return false
	}
	return m.Type == discordgo.MessageTypeDefault || m.Type == discordgo.MessageTypeReply
}

// message hands one message over to the service.
//
// It is addressed to the bot when its text mentions the bot: Discord also
// lists the bot among a reply's mentions when the reply pings the author
// of the message replied to, and a reply to the bot's own message is not a
// new request. In a task's thread such a reply is a comment, also under
// RequireMention.
func (a *Adapter) message(ctx context.Context, m *discordgo.Message, bot string) {
	addressed := mentions(m, bot)
	msg := chat.Message{
		MsgID:     m.ID,
		Author:    author(m.Author, m.Member),
		Text:      a.readable(ctx, m, bot, new(int)),
		Stickers:  stickers(m),
		Files:     a.files(m.Attachments),
		Addressed: addressed,
		At:        m.Timestamp,
	}
	if msg.Text != strings.TrimSpace(m.Content) {
		msg.Original = m.Content
	}
	log := a.log.With("channel", m.ChannelID, "msg", m.ID)
	switch {
	case m.GuildID == "":
		// A DM channel is one task: everything in it is for the bot.
		msg.Thread = core.ThreadRef{Platform: core.PlatformDiscord, Channel: m.ChannelID, Thread: m.ChannelID}
		msg.Channel = "discord:" + m.ChannelID
		msg.Addressed, msg.Direct = true, true
		a.remember(m.ChannelID, channelInfo{dm: true})
	default:
		info, err := a.channel(ctx, m.ChannelID)
		if err != nil {
			log.Warn("ignoring a message in a channel Baton cannot look up", "err", err)
			return
		}
		switch {
		case info.thread:
			if a.cfg.RequireMention && !addressed && !repliesTo(m, bot) {
				return
			}
			msg.Thread = ref(m.ChannelID, info)
			msg.Channel = "discord:" + info.parent
			if addressed {
				thread := m.ChannelID
				msg.History = func(ctx context.Context) ([]chat.Message, error) { return a.history(ctx, thread, bot) }
			}
		case !addressed:
			return // channel chatter: Baton only answers mentions here
		default:
			id, err := a.startThread(ctx, m, msg.Text)
			if err != nil {
				log.Error("creating a thread for a request failed", "err", err)
				a.say(ctx, m.ChannelID, "I could not open a thread for this request: "+plainReason(err))
				return
			}
			a.remember(id, channelInfo{guild: m.GuildID, parent: m.ChannelID, thread: true})
			msg.Thread = core.ThreadRef{Platform: core.PlatformDiscord, Team: m.GuildID, Channel: m.ChannelID, Thread: id}
			msg.Channel = "discord:" + m.ChannelID
		}
		msg.Thread.Team = m.GuildID
	}
	reply, err := a.svc.HandleMessage(ctx, msg)
	if err != nil {
		log.Error("handling a Discord message failed", "err", err)
		return
	}
	if reply.Text != "" {
		// Discord cannot show a message to one person outside an
		// interaction: the answer goes to the thread.
		a.say(ctx, postChannel(msg.Thread), reply.Text)
	}
}

// startThread creates the public thread of a request from its message and
// returns the thread's id (the message's id).
func (a *Adapter) startThread(ctx context.Context, m *discordgo.Message, text string) (string, error) {
	name := chattext.Title(text, 80)
	if name == "" {
		name = "Baton task"
	}
	th, err := a.s.MessageThreadStartComplex(m.ChannelID, m.ID, &discordgo.ThreadStart{
		Name: name, AutoArchiveDuration: threadArchive,
		// Set explicitly: without it the type defaults by channel, and
		// a thread must be public for everyone in the channel to follow.
		Type: discordgo.ChannelTypeGuildPublicThread,
	}, discordgo.WithContext(ctx))
	if hasCode(err, codeThreadExists) {
		return m.ID, nil
	}
	if err != nil {
		return "", a.deliveryErr("start thread from "+m.ID, m.ChannelID, err)
	}
	return th.ID, nil
}

// history returns a thread's earlier messages, oldest first.
func (a *Adapter) history(ctx context.Context, thread, bot string) ([]chat.Message, error) {
	ms, err := a.s.ChannelMessages(thread, historyLimit, "", "", "", discordgo.WithContext(ctx))
	if err != nil {
		return nil, fmt.Errorf("discord: earlier messages of thread %s: %w", thread, err)
	}
	out := make([]chat.Message, 0, len(ms))
	// One lookup budget for the whole thread.
	lookups := new(int)
	for _, m := range slices.Backward(ms) { // Discord lists the newest first
		if m.Author == nil || (m.Type != discordgo.MessageTypeDefault && m.Type != discordgo.MessageTypeReply) {
			continue
		}
		h := chat.Message{MsgID: m.ID, Author: author(m.Author, m.Member), Text: a.readable(ctx, m, bot, lookups), Stickers: stickers(m), At: m.Timestamp}
		if h.Text != strings.TrimSpace(m.Content) {
			h.Original = m.Content
		}
		out = append(out, h)
	}
	return out, nil
}

// maxLookups bounds the channel lookups (REST calls) the references of
// one message, or of a thread's earlier messages together, may cost;
// channels beyond that keep their id (#123).
const maxLookups = 10

// readable is m's text as people read it: the bot's mentions removed and
// Discord's markup rewritten (chattext.Readable), users named from the
// message's mentions, roles and channels from the gateway's state. A
// channel not there is looked up while *lookups, the lookups made so far
// for the event, is below maxLookups.
func (a *Adapter) readable(ctx context.Context, m *discordgo.Message, bot string, lookups *int) string {
	users := map[string]string{}
	for _, u := range m.Mentions {
		if u == nil {
			continue
		}
		users[u.ID] = u.Username
		if u.GlobalName != "" {
			users[u.ID] = u.GlobalName
		}
		if mem, err := a.s.State.Member(m.GuildID, u.ID); err == nil && mem.Nick != "" {
			users[u.ID] = mem.Nick
		}
	}
	refs := chattext.Refs{
		User: func(id string) (string, bool) {
			name, ok := users[id]
			return name, ok
		},
		Role: func(id string) (string, bool) {
			r, err := a.s.State.Role(m.GuildID, id)
			if err != nil || r == nil {
				return "", false
			}
			return r.Name, true
		},
		Channel: func(id string) (string, bool) {
			if c, err := a.s.State.Channel(id); err == nil && c != nil {
				return c.Name, true
			}
			if *lookups >= maxLookups || ctx.Err() != nil {
				return "", false
			}
			*lookups++
			info, err := a.channel(ctx, id)
			return info.name, err == nil
		},
	}
	return strings.TrimSpace(chattext.Readable(chattext.Discord, stripMention(m.Content, bot), refs))
}

// stickers returns the names of the stickers sent with m.
func stickers(m *discordgo.Message) []string {
	var out []string
	for _, st := range m.StickerItems {
		if st != nil && st.Name != "" {
			out = append(out, st.Name)
		}
	}
	return out
}

// repliesTo reports whether m is a reply to a message of the bot's.
func repliesTo(m *discordgo.Message, bot string) bool {
	r := m.ReferencedMessage
	return m.Type == discordgo.MessageTypeReply && r != nil && r.Author != nil && r.Author.ID == bot
}

// files lists a message's attachments; Open downloads one through the
// session's HTTP client.
func (a *Adapter) files(atts []*discordgo.MessageAttachment) []chat.File {
	var out []chat.File
	for _, at := range atts {
		if at == nil {
			continue
		}
		url := at.URL
		out = append(out, chat.File{Name: at.Filename, Size: int64(at.Size), Open: func(ctx context.Context) (io.ReadCloser, error) {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			if err != nil {
				return nil, fmt.Errorf("discord: attachment: %w", err)
			}
			resp, err := a.s.Client.Do(req)
			if err != nil {
				return nil, fmt.Errorf("discord: download attachment: %w", err)
			}
			if resp.StatusCode != http.StatusOK {
				resp.Body.Close()
				return nil, fmt.Errorf("discord: download attachment: %s", resp.Status)
			}
			return resp.Body, nil
		}})
	}
	return out
}

func (a *Adapter) onReaction(_ *discordgo.Session, e *discordgo.MessageReactionAdd) {
	bot := a.botUser()
	if e.MessageReaction == nil || bot == "" || e.UserID == bot {
		return // the bot's own reactions never trigger anything
	}
	name := shortName(e.Emoji.Name)
	if name != chat.EmojiFailed {
		return
	}
	r := *e.MessageReaction
	member := e.Member
	a.queue(r.ChannelID, func(ctx context.Context) {
		who := author(nil, member)
		if who.ID == "" {
			who = chat.Author{ID: "discord:" + r.UserID}
		}
		// A reaction in a channel on a message a thread was started
		// from names that thread (its id is the message's); inside a
		// thread it names the thread.
		thread := core.ThreadRef{Platform: core.PlatformDiscord, Team: r.GuildID, Channel: r.ChannelID, Thread: r.MessageID}
		if r.GuildID == "" {
			thread.Thread = r.ChannelID
		} else if info, err := a.channel(ctx, r.ChannelID); err == nil && info.thread {
			thread = ref(r.ChannelID, info)
		}
		reply, err := a.svc.HandleReaction(ctx, chat.Reaction{Thread: thread, MsgID: r.MessageID, Emoji: name, Author: who})
		if err != nil {
			a.log.Error("handling a Discord reaction failed", "channel", r.ChannelID, "msg", r.MessageID, "err", err)
			return
		}
		if reply.Text != "" {
			a.say(ctx, postChannel(thread), reply.Text)
		}
	})
}

// say posts a short answer of the bot's own, directly (not through the
// outbox): a refusal or the reason a request could not start.
func (a *Adapter) say(ctx context.Context, channel, text string) {
	if _, err := a.Post(ctx, core.ThreadRef{Platform: core.PlatformDiscord, Thread: channel}, text); err != nil {
		a.log.Warn("posting an answer in Discord failed", "channel", channel, "err", err)
	}
}

// plainReason is the sentence a person sees for a failed thread creation.
func plainReason(err error) string {
	if hasCode(err, codeMissingPermissions) || hasCode(err, codeMissingAccess) {
		return "I lack the Create Public Threads or Send Messages in Threads permission in this channel."
	}
	return "Discord refused it; please try again in a moment."
}
