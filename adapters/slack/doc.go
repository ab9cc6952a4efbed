// Package slack connects Baton to Slack through github.com/slack-go/slack. It
// receives events over Socket Mode or the Events API (signed HTTP requests),
// turns mentions, thread messages, reactions and the /baton slash command into
// calls on core's conversation service, deduplicating Slack's repeated
// deliveries, and delivers the outbox to threads: posts, status-message edits,
// reactions and file uploads, at Slack's rate limits. It never imports the
// queue; the bot package wires it to the rest of Baton.
package slack
