package discord

import (
	"context"
	"fmt"
	"strings"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/chat"
	"github.com/baton-bot/baton/core/chattext"
	"github.com/bwmarrin/discordgo"
)

// progressSteps is how many of the last tool calls the progress embed
// shows.
const progressSteps = 6

// Embed colours of a job's progress: running, over.
const (
	colorRunning = 0x5865F2
	colorDone    = 0x57F287
)

var _ chat.ProgressPoster = (*Adapter)(nil)

// Progress implements chat.ProgressPoster: one message per job run whose
// embed shows the piece's movements (done, running, to come) and its last
// tool calls, posted at the first view and edited at the next ones. The
// answer is never put in it: the deliverer posts it as messages of their
// own when the job is done.
func (a *Adapter) Progress(ctx context.Context, thread core.ThreadRef, msgID string, v chat.ProgressView, _ string) (string, bool, error) {
	ch := postChannel(thread)
	embed := progressEmbed(v)
	if msgID == "" {
		m, err := a.s.ChannelMessageSendComplex(ch, &discordgo.MessageSend{Embeds: []*discordgo.MessageEmbed{embed}, AllowedMentions: noPings()},
			discordgo.WithContext(ctx))
		if err != nil {
			return "", false, a.deliveryErr("post progress", ch, err)
		}
		return m.ID, false, nil
	}
	edit := discordgo.NewMessageEdit(ch, msgID)
	edit.Embeds = &[]*discordgo.MessageEmbed{embed}
	edit.AllowedMentions = noPings()
	if _, err := a.s.ChannelMessageEditComplex(edit, discordgo.WithContext(ctx)); err != nil {
		if hasCode(err, codeUnknownMessage) {
			return "", false, fmt.Errorf("discord edit progress %s: %w", msgID, chat.ErrProgressGone)
		}
		return "", false, a.deliveryErr("edit progress "+msgID, ch, err)
	}
	return msgID, false, nil
}

// progressEmbed is v as an embed: the plan in the title and the first
// lines, then the last tool calls.
func progressEmbed(v chat.ProgressView) *discordgo.MessageEmbed {
	title := v.Piece
	if v.Current > 0 && v.Current <= len(v.Plan) {
		title = fmt.Sprintf("%s: %s (%d/%d)", v.Piece, v.Plan[v.Current-1].Title, v.Current, len(v.Plan))
	}
	var b strings.Builder
	for _, m := range v.Plan {
		b.WriteString(chat.StepMark(m.State) + " **" + chattext.NeutralizeName(m.Title, chattext.Discord) + "**\n")
	}
	tools := v.Tools
	if len(tools) > progressSteps {
		tools = tools[len(tools)-progressSteps:]
	}
	if len(tools) > 0 {
		b.WriteString("\n")
	}
	for _, t := range tools {
		b.WriteString(chat.StepMark(t.State) + " `" + strings.ReplaceAll(cutRunes(t.Title, 90), "`", "'") + "`\n")
	}
	color := colorRunning
	if v.Final {
		color = colorDone
	}
	return &discordgo.MessageEmbed{Title: cutRunes(chattext.NeutralizeName(title, chattext.Discord), 250), Description: cutRunes(b.String(), 4000), Color: color}
}

// cutRunes cuts s to at most n characters.
func cutRunes(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
