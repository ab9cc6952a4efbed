// Package slack connects Baton to Slack through github.com/slack-go/slack.
//
// Adapter receives events over Socket Mode (Run) or the Events API
// (Handler, with every request's signature checked) and turns mentions,
// thread messages, direct messages, reactions and the /baton slash command
// into calls on core's conversation service. It acknowledges every delivery
// at once, retries included, and hands events to a bounded pool of workers;
// the service drops repeated deliveries (by event id and by message ts).
//
// Poster delivers the outbox to threads: posts rendered as mrkdwn with mass
// mentions made inert, status-message edits, reactions and file uploads,
// translating Slack's rate limits and permanent errors for the deliverer.
//
// The package never imports the queue; the bot package wires it to the
// rest of Baton.
package slack
