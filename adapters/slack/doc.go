// Package slack connects Baton to Slack through github.com/slack-go/slack.
//
// Adapter receives events over Socket Mode (Run) or the Events API
// (Handler, with every request's signature checked) and turns mentions,
// thread messages, direct messages, reactions and the /baton slash command
// into calls on core's conversation service, and clicks on Baton's buttons
// (block_actions interactions, on POST /slack/interactions or as Socket
// Mode interactive envelopes, signed and acknowledged as events are) into
// Service.HandleAction, whose reply only the clicker sees. It acknowledges
// every delivery at once, retries included, and hands events to a bounded
// pool of workers, which at shutdown still handle the events acknowledged
// (Slack does not send them again); the service drops repeated deliveries
// (by event id and by message ts). Authors carry the user groups of theirs
// that the access lists name, looked up and cached per group.
//
// Poster delivers the outbox to threads: posts rendered as mrkdwn with mass
// mentions made inert, status-message edits, messages with buttons (Block
// Kit: a section and an actions block; an edit without buttons removes
// them), reactions and file uploads, translating Slack's rate limits and
// permanent errors for the deliverer; a text Slack refuses as too long is
// sent again in smaller parts.
//
// The package never imports the queue; the bot package wires it to the
// rest of Baton.
package slack
