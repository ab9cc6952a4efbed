// Package discord connects Baton to Discord through
// github.com/bwmarrin/discordgo. It listens on the gateway, opens a thread for
// each mention so that the thread becomes a task, turns messages in task
// threads, direct messages, reactions and the /baton application command into
// calls on core's conversation service, and delivers the outbox within
// Discord's rate-limit buckets with mentions neutralised. It never imports the
// queue; the bot package wires it to the rest of Baton.
package discord
