// Package chattext holds the text transformations every chat platform needs
// before Baton posts and after it receives: splitting long Markdown into
// posts without breaking code fences (Split, SplitBytes, Parts), making mass
// mentions inert (Neutralize), converting Markdown to Slack mrkdwn
// (SlackMrkdwn), deriving a one-line title (Title), and on the way in
// rewriting a platform's references as the plain text people read (Readable)
// and sanitising it (Clean).
//
// A deliverer applies them in this order: Neutralize (its replacements
// contain no <, & or fence, so later steps leave them inert), then the
// platform rendering (SlackMrkdwn for Slack), then Split, SplitBytes or
// Parts on the rendered text, so that the limit holds for what is sent.
//
// An adapter applies Readable once to what it receives; the conversation
// service then applies Clean and derives the title from the result.
//
// Every function is pure: no I/O, no global state, safe for concurrent use
// (Readable calls the lookups its caller hands it, and nothing else).
// The package imports only the standard library so that the outbox
// deliverers of every platform and the conversation service can share it.
package chattext
