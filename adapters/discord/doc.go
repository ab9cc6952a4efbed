// Package discord connects Baton to Discord through
// github.com/bwmarrin/discordgo. It listens on the gateway, opens a thread for
// each mention so that the thread becomes a task, turns messages in task
// threads, direct messages, reactions and the /baton application command into
// calls on core's conversation service, and delivers the outbox within
// Discord's rate-limit buckets with mentions neutralised. It never imports the
// queue; the bot package wires it to the rest of Baton.
//
// A mention of the bot in a text channel starts a task in a public thread
// created from that message: the thread's id (equal to the message's) is
// the task's key, and later messages in the thread are its comments. A
// mention inside an existing thread makes that thread a task and hands over
// its earlier messages once. A direct-message channel is one task. The
// /baton application command (status, abort, retry, list, policy, help) is
// registered at start and answered with a deferred ephemeral response.
//
// Messages with buttons (an approval's Approve, Deny and Always allow, a
// running job's Stop, a failed job's Retry) are posted with one action row
// of message components whose custom_id is the button's action (the
// Adapter is a chat.ButtonPoster); an edit without buttons removes them. A
// click is acknowledged at once with a deferred update and handed to the
// service (Service.HandleAction); what the service says back goes to the
// clicker alone as an ephemeral follow-up.
//
// Every REST call, and the question for the gateway's address, goes to
// Config.APIURL through the session's HTTP client. Discord's rate limits
// are per process: run one Adapter, in the process that delivers the
// Discord outbox.
package discord
