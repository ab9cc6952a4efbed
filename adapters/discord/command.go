package discord

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/chat"
	"github.com/baton-bot/baton/core/chattext"
)

// commandName is the application command Baton registers.
const commandName = "baton"

// optionRevoke is /baton policy's option naming the rule to revoke.
const optionRevoke = "revoke"

// codeUnknownInteraction is Discord's answer to a response sent after the
// interaction's 3 seconds ran out.
const codeUnknownInteraction = 10062

// commands is /baton with its subcommands; status, abort and retry take an
// optional task number (inside a task's thread the task is implicit);
// policy lists the channel's always-allow rules, or revokes one (admins).
func commands() []*discordgo.ApplicationCommand {
	task := []*discordgo.ApplicationCommandOption{{
		Type: discordgo.ApplicationCommandOptionInteger, Name: "task",
		Description: "The task's number (inside a task's thread: that task)", MinValue: new(float64(1)),
	}}
	revoke := []*discordgo.ApplicationCommandOption{{
		Type: discordgo.ApplicationCommandOptionInteger, Name: optionRevoke,
		Description: "The number of the rule to revoke (admins)", MinValue: new(float64(1)),
	}}
	sub := func(name, desc string, opts []*discordgo.ApplicationCommandOption) *discordgo.ApplicationCommandOption {
		return &discordgo.ApplicationCommandOption{Type: discordgo.ApplicationCommandOptionSubCommand, Name: name, Description: desc, Options: opts}
	}
	return []*discordgo.ApplicationCommand{{
		Name:        commandName,
		Description: "Baton's tasks: status, abort, retry, list, policy, mcp, help",
		Options: []*discordgo.ApplicationCommandOption{
			sub("status", "Show a task's job: piece, movement, tokens, time", task),
			sub("abort", "Stop a task's running job", task),
			sub("retry", "Run a task's failed or aborted job again from where it stopped", task),
			sub("list", "List your active tasks (admins: everyone's)", nil),
			sub("policy", "List this channel's always-allow rules, or revoke one (admins)", revoke),
			sub("mcp", "List the MCP servers this channel's tasks may use", nil),
			sub("help", "How to use Baton", nil),
		},
	}}
}

// register overwrites the application's commands with /baton: in the guild
// when GuildID is set (available at once), else globally.
func (a *Adapter) register(ctx context.Context) error {
	app := a.appID.Load()
	if app == nil {
		return errors.New("discord: no application id (READY not received)")
	}
	if _, err := a.s.ApplicationCommandBulkOverwrite(*app, a.cfg.GuildID, commands(), discordgo.WithContext(ctx)); err != nil {
		return fmt.Errorf("discord: register /%s: %w", commandName, err)
	}
	return nil
}

// onInteraction takes /baton and clicks on Baton's buttons. Both run on
// goroutines of their own (spawn), never behind a channel's messages, so
// that they are answered within Discord's 3 seconds.
func (a *Adapter) onInteraction(_ *discordgo.Session, e *discordgo.InteractionCreate) {
	if e.Interaction == nil {
		return
	}
	in := e.Interaction
	switch e.Type {
	case discordgo.InteractionApplicationCommand:
		data := e.ApplicationCommandData()
		if data.Name != commandName {
			return
		}
		a.spawn(func(ctx context.Context) { a.command(ctx, in, data) })
	case discordgo.InteractionMessageComponent:
		data := e.MessageComponentData()
		a.spawn(func(ctx context.Context) { a.component(ctx, in, data) })
	}
}

// Texts of the adapter's own answers to /baton.
const (
	textFailed = "Something went wrong; please try again."
	textDone   = "Done."
)

// commandTimeout bounds a /baton command that outlived CommandWait, so that
// its deferred response is always completed (Discord keeps the
// interaction's token for 15 minutes).
const commandTimeout = time.Minute

// command runs /baton and answers within Discord's 3 seconds: with the
// command's outcome when it has one within CommandWait (the answer, or an
// ephemeral error when it failed, a store write for one), else with a
// deferred ephemeral response that is edited with the outcome once there
// is one, within commandTimeout. Either way the person hears how it went.
func (a *Adapter) command(ctx context.Context, in *discordgo.Interaction, data discordgo.ApplicationCommandInteractionData) {
	log := a.log.With("interaction", in.ID, "channel", in.ChannelID)
	result := make(chan string, 1)
	go func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commandTimeout)
		defer cancel()
		result <- a.runCommand(cctx, log, in, data)
	}()
	t := time.NewTimer(a.cfg.CommandWait)
	defer t.Stop()
	select {
	case text := <-result:
		err := a.s.InteractionRespond(in, &discordgo.InteractionResponse{
			Type: discordgo.InteractionResponseChannelMessageWithSource,
			Data: &discordgo.InteractionResponseData{Content: answerText(text), Flags: discordgo.MessageFlagsEphemeral, AllowedMentions: noPings()},
		}, discordgo.WithContext(ctx))
		switch {
		case hasCode(err, codeUnknownInteraction):
			log.Warn("a /baton command was answered too late (Discord allows 3 seconds); it ran, its answer was not shown")
		case err != nil:
			log.Error("answering a /baton command failed; it ran, its answer was not shown", "err", err)
		}
		return
	case <-t.C:
	}
	err := a.s.InteractionRespond(in, &discordgo.InteractionResponse{
		Type: discordgo.InteractionResponseDeferredChannelMessageWithSource,
		Data: &discordgo.InteractionResponseData{Flags: discordgo.MessageFlagsEphemeral},
	}, discordgo.WithContext(ctx))
	switch {
	case hasCode(err, codeUnknownInteraction):
		log.Warn("a /baton command was answered too late (Discord allows 3 seconds); it runs, its answer will not be shown")
	case err != nil:
		log.Error("answering a /baton command failed; it runs, its answer will not be shown", "err", err)
	}
	text := <-result
	if err != nil {
		return
	}
	ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), requestTimeout)
	defer cancel()
	content := answerText(text)
	if _, err := a.s.InteractionResponseEdit(in, &discordgo.WebhookEdit{Content: &content, AllowedMentions: noPings()}, discordgo.WithContext(ectx)); err != nil {
		log.Error("editing the answer of a /baton command failed", "err", err)
	}
}

// runCommand translates and runs /baton and returns what to answer: the
// service's reply, or textFailed when it failed.
func (a *Adapter) runCommand(ctx context.Context, log *slog.Logger, in *discordgo.Interaction, data discordgo.ApplicationCommandInteractionData) string {
	c := chat.Command{Author: author(in.User, in.Member), Channel: "discord:" + in.ChannelID}
	if len(data.Options) > 0 {
		sub := data.Options[0]
		c.Name = sub.Name
		for _, o := range sub.Options {
			if o.Type != discordgo.ApplicationCommandOptionInteger {
				continue
			}
			switch o.Name {
			case "task":
				c.Args = "#" + strconv.FormatInt(o.IntValue(), 10)
			case optionRevoke:
				c.Args = "revoke " + strconv.FormatInt(o.IntValue(), 10) // as `!policy revoke N`
			}
		}
	}
	switch {
	case in.GuildID == "":
		c.Thread = core.ThreadRef{Platform: core.PlatformDiscord, Channel: in.ChannelID, Thread: in.ChannelID}
		c.InThread, c.Direct = true, true
	default:
		info, err := a.channel(ctx, in.ChannelID)
		if err != nil {
			log.Warn("looking up the channel of a /baton command failed", "err", err)
		}
		if info.thread {
			c.Thread, c.InThread = ref(in.ChannelID, info), true
			c.Channel = "discord:" + info.parent
		}
	}
	reply, err := a.svc.HandleCommand(ctx, c)
	switch {
	case err != nil:
		log.Error("running a /baton command failed", "command", c.Name, "err", err)
		return textFailed
	case reply.Text == "":
		return textDone
	}
	return reply.Text
}

// answerText is text as one Discord message: neutralised, and cut to the
// first 2,000 characters' part.
func answerText(text string) string {
	parts := chattext.Split(chattext.Neutralize(text, chattext.Discord), 2000)
	if len(parts) == 0 {
		return textDone
	}
	return parts[0]
}
