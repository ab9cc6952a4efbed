package discord

import (
	"context"
	"log/slog"

	"github.com/bwmarrin/discordgo"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/chat"
)

// A click on one of Baton's buttons (Approve, Deny, Always allow, Stop,
// Retry) arrives as a message component interaction. Discord wants it
// answered within 3 seconds: it is acknowledged at once with a deferred
// update (nothing shown; the message's edit through the outbox shows the
// outcome), then handed to the service, and what the service says to the
// clicker goes back as an ephemeral follow-up that only they see.

// component acknowledges a click and hands it to the service. Rights,
// allowed channels and "one decision per approval" are the service's to
// check: the adapter relays its reply.
func (a *Adapter) component(ctx context.Context, in *discordgo.Interaction, data discordgo.MessageComponentInteractionData) {
	log := a.log.With("interaction", in.ID, "channel", in.ChannelID)
	acked := true
	err := a.s.InteractionRespond(in, &discordgo.InteractionResponse{Type: discordgo.InteractionResponseDeferredMessageUpdate}, discordgo.WithContext(ctx))
	switch {
	case hasCode(err, codeUnknownInteraction):
		acked = false
		log.Warn("a button click was acknowledged too late (Discord allows 3 seconds); it is handled, its answer will not be shown")
	case err != nil:
		acked = false
		log.Error("acknowledging a button click failed; it is handled, its answer will not be shown", "err", err)
	}
	// A click that was acknowledged is handled to the end, even when Run
	// is stopping, so that the person hears how it went.
	hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commandTimeout)
	defer cancel()
	text := a.runAction(hctx, log, in, data.CustomID)
	if text == "" || !acked {
		return
	}
	if _, err := a.s.FollowupMessageCreate(in, true, &discordgo.WebhookParams{
		Content: answerText(text), Flags: discordgo.MessageFlagsEphemeral, AllowedMentions: noPings(),
	}, discordgo.WithContext(hctx)); err != nil {
		log.Error("answering a button click failed; it was handled, its answer was not shown", "err", err)
	}
}

// runAction translates the click on message in.Message with custom_id
// value into a chat.Action, runs it and returns what to tell the clicker:
// the service's reply ("" for nothing), or textFailed when it failed.
func (a *Adapter) runAction(ctx context.Context, log *slog.Logger, in *discordgo.Interaction, value string) string {
	act := chat.Action{Value: value, Author: author(in.User, in.Member), Channel: "discord:" + in.ChannelID}
	if in.Message != nil {
		act.MsgID = in.Message.ID
	}
	switch {
	case in.GuildID == "":
		act.Thread = core.ThreadRef{Platform: core.PlatformDiscord, Channel: in.ChannelID, Thread: in.ChannelID}
		act.Direct = true
	default:
		info, err := a.channel(ctx, in.ChannelID)
		if err != nil {
			log.Warn("looking up the channel of a button click failed", "err", err)
		}
		// As for messages: a thread under its channel, which is the one
		// access.allowed_channels names.
		act.Thread = ref(in.ChannelID, info)
		act.Thread.Team = in.GuildID
		if info.thread {
			act.Channel = "discord:" + info.parent
		}
	}
	reply, err := a.svc.HandleAction(ctx, act)
	if err != nil {
		log.Error("handling a button click failed", "action", value, "err", err)
		return textFailed
	}
	return reply.Text
}
