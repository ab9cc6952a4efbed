// Package chat is Baton's conversation service: it turns what people say in
// threads — on any platform — into tasks, comments and jobs, answers the
// in-thread and slash commands, and says what the bot has to say through the
// outbox.
//
// Adapters translate their platform's events into Message, Command and
// Reaction values and call the Service; they implement Poster so that the
// outbox deliverer can post, edit, react and upload on their platform.
package chat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/baton-bot/baton/core"
)

// Author is who wrote a message or ran a command.
type Author struct {
	// ID is the platform-qualified user id, e.g. "slack:U123", "discord:42",
	// "console:alice"; access control compares it with access.* lists.
	ID   string
	Name string
	// Groups are the platform-qualified groups or roles of the author, e.g.
	// "slack-group:S1", "discord-role:7"; access lists may name them.
	Groups []string
	Bot    bool // written by a bot (possibly Baton itself)
}

// File is an attachment of a message.
type File struct {
	Name string
	Size int64 // bytes; -1 when unknown
	// Open reads the file's content from the platform.
	Open func(ctx context.Context) (io.ReadCloser, error)
}

// Message is one message in a thread, as an adapter hands it over.
type Message struct {
	// Thread is the conversation: its root is the task's key.
	Thread core.ThreadRef
	// Channel is the platform-qualified channel, e.g. "slack:C123", for
	// access.allowed_channels.
	Channel string
	// MsgID is the platform's id of the message, unique in the thread.
	MsgID string
	// EventID is the platform's id of the delivery, when it has one (a
	// repeated delivery carries the same one).
	EventID string
	Author  Author
	// Text is the message as people read it: the adapter has rewritten
	// the platform's markup (chattext.Readable) and removed the bot's own
	// mention. It is what the model reads.
	Text string
	// Original is the text as the platform sent it, stored beside Text for
	// audit; "" when it is Text.
	Original string
	// Stickers are the names of the stickers sent with the message: each
	// is written into the comment as "[sticker: name]". A message of
	// stickers alone in a task's thread is a comment, never a request.
	Stickers []string
	Files    []File
	// Piece, when set, names the piece the job the message starts runs
	// (the task API's "piece" field): Text is then the request alone and
	// is stored as written, never read as a `!piece` command. An unknown
	// piece is answered as `!piece` answers it.
	Piece string
	// Addressed reports that the message is for the bot: it mentions it,
	// or it is a direct message. A thread that is not a task yet becomes
	// one only then.
	Addressed bool
	// Direct reports a direct-message channel, which is one thread for
	// ever: `!new` starts a new task in it.
	Direct bool
	// History, when set, returns the earlier messages of a thread the bot
	// was mentioned in for the first time; it is called once, when the task
	// is created.
	History func(ctx context.Context) ([]Message, error)
	At      time.Time
}

// Command is a slash command (or an in-thread `!` command).
type Command struct {
	Name   string // status, abort, retry, list, help, piece, new
	Args   string // the rest of the line: "#42", a piece name and request, …
	Thread core.ThreadRef
	// InThread reports that the command was given in a task's thread, so
	// the task is implicit.
	InThread bool
	// Direct reports a direct-message channel (see Message.Direct).
	Direct  bool
	Channel string
	Author  Author
}

// Reaction is an emoji added by a person to a message.
type Reaction struct {
	Thread core.ThreadRef
	MsgID  string // the message reacted to
	Emoji  string // platform-neutral short name: "x", "eyes", …
	Author Author
}

// Reply is what a command or a refusal answers, shown only to the person
// where the platform allows it.
type Reply struct {
	Text string
	// Public asks for the reply to be posted in the thread for everyone.
	Public bool
}

// Kinds of outbox payloads are core.OutboxKind values; Payload is their
// JSON.
//
//   - post: Text posted in the thread.
//   - update: Text is the job's status message: the first update of a job
//     posts it, later ones edit that message.
//   - react, unreact: Emoji on message MsgID.
//   - upload: the workspace file Path uploaded into the thread, with Text.
type Payload struct {
	Text string `json:"text,omitempty"`
	// Buttons go with a post or an update on platforms that show them
	// (ButtonPoster); an update without buttons removes those the message
	// had. Elsewhere the text alone stands: it names the commands that do
	// the same.
	Buttons []Button `json:"buttons,omitempty"`
	Emoji   string   `json:"emoji,omitempty"`
	MsgID   string   `json:"msg_id,omitempty"`
	Path    string   `json:"path,omitempty"` // absolute path of an upload
	Name    string   `json:"name,omitempty"` // the file's name on the platform
	// Progress, on an update, is a job's live progress (ProgressView)
	// rather than a text.
	Progress *ProgressView `json:"progress,omitempty"`
}

// Encode returns the payload's JSON.
func (p Payload) Encode() string {
	b, _ := json.Marshal(p) // plain strings: cannot fail
	return string(b)
}

// DecodePayload parses an outbox message's payload.
func DecodePayload(s string) (Payload, error) {
	var p Payload
	if err := json.Unmarshal([]byte(s), &p); err != nil {
		return Payload{}, fmt.Errorf("outbox payload: %w", err)
	}
	return p, nil
}

// Emoji short names Baton uses for progress.
const (
	EmojiClaimed = "eyes"
	EmojiDone    = "white_check_mark"
	EmojiFailed  = "x"
)

// Limits are a platform's message limits.
type Limits struct {
	Post     int // characters a post may hold
	Update   int // bytes an edit may hold; 0: as Post
	MaxParts int // posts before a long text is sent as a file instead
	// Every is the least time between two posts in one channel; 0: none.
	Every time.Duration
}

// Button is an action people can click on a message. Action is opaque to
// the platform: it is handed back, as clicked, in Action.Value
// (Service.HandleAction).
type Button struct {
	Action string `json:"action"`
	Label  string `json:"label"`
	// Style is "primary", "danger" or "" (the platform's default).
	Style string `json:"style,omitempty"`
}

// Button styles.
const (
	StylePrimary = "primary"
	StyleDanger  = "danger"
)

// ButtonPoster is a Poster whose platform shows buttons. The deliverer
// uses it for every post and update that has buttons, and for every update
// (so that buttons a message had are removed when the update has none).
type ButtonPoster interface {
	PostButtons(ctx context.Context, thread core.ThreadRef, text string, buttons []Button) (msgID string, err error)
	UpdateButtons(ctx context.Context, thread core.ThreadRef, msgID, text string, buttons []Button) error
}

// KeyedPoster is a Poster whose posts can carry a key naming what they
// deliver (an outbox message and its part), so that a delivery whose
// outcome was lost can be told apart from one never made: the platform
// itself answers a post repeated with a key it saw recently with the
// message made then (Discord's enforced nonce), or a DeliveryFinder looks
// the key up. The deliverer posts through PostKeyed, buttons or not, in
// place of Post and PostButtons.
type KeyedPoster interface {
	// PostKeyed posts text in thread, with buttons as PostButtons shows
	// them (none: as Post), tagged with key, and returns the message's
	// id (the first message's, when the platform needs several).
	PostKeyed(ctx context.Context, thread core.ThreadRef, text string, buttons []Button, key string) (msgID string, err error)
}

// DeliveryFinder is a KeyedPoster that can look a post up by its key.
// Before posting a message an earlier delivery may have posted already
// (its claim was lost, or its try failed without saying why), the
// deliverer asks it whether that post exists.
type DeliveryFinder interface {
	// FindDelivered returns the id of the message posted in thread with
	// key (the earliest, when several were), and whether there is one.
	// An error means the platform could not be asked; found false means
	// it was asked and has no such post.
	FindDelivered(ctx context.Context, thread core.ThreadRef, key string) (msgID string, found bool, err error)
}

// FilePoster is a Poster on the machine that holds the workspaces (the
// console): the deliverer names a file the job produced by its absolute
// path and size, and sends no content, in place of Upload. The
// deliverer's checks (inside the workspace, a regular file, the size
// limit) come first.
type FilePoster interface {
	PostFile(ctx context.Context, thread core.ThreadRef, path string, size int64, comment string) (msgID string, err error)
}

// Action is a click on a button, as an adapter hands it over.
type Action struct {
	// Value is the clicked Button's Action.
	Value   string
	Thread  core.ThreadRef
	Channel string // platform-qualified, for access.allowed_channels
	// MsgID is the platform id of the message that carried the button.
	MsgID  string
	Direct bool
	Author Author
}

// Poster sends to one platform. Adapters implement it; the outbox deliverer
// calls it, one call at a time per thread. Errors wrapping ErrPermanent are
// not retried; a *RateLimitedError says when to try again.
type Poster interface {
	// Post posts text in thread and returns the new message's id.
	Post(ctx context.Context, thread core.ThreadRef, text string) (msgID string, err error)
	// Update replaces the text of message msgID in thread.
	Update(ctx context.Context, thread core.ThreadRef, msgID, text string) error
	// React adds emoji to message msgID, or removes it when remove is set.
	React(ctx context.Context, thread core.ThreadRef, msgID, emoji string, remove bool) error
	// Upload posts the file name with content r into thread, with a comment.
	Upload(ctx context.Context, thread core.ThreadRef, name string, r io.Reader, size int64, comment string) (msgID string, err error)
	// Limits returns the platform's limits.
	Limits() Limits
}

// ErrPermanent marks a delivery error that retrying cannot fix (the channel
// is gone, the bot was removed, the message was deleted).
var ErrPermanent = errors.New("permanent delivery failure")

// RateLimitedError reports a platform's rate limit: try again after After.
type RateLimitedError struct {
	After time.Duration
	Err   error
}

func (e *RateLimitedError) Error() string {
	return fmt.Sprintf("rate limited, retry after %s: %v", e.After, e.Err)
}

func (e *RateLimitedError) Unwrap() error { return e.Err }
