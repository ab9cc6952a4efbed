package core

import "time"

// Platform names a chat platform or entry point.
type Platform string

// Known platforms.
const (
	PlatformSlack   Platform = "slack"
	PlatformDiscord Platform = "discord"
	PlatformConsole Platform = "console"
	PlatformAPI     Platform = "api"
	PlatformSubtask Platform = "subtask"
)

// ThreadRef identifies a conversation on a platform: a Slack thread
// (team, channel, thread_ts), a Discord thread (guild, thread id), a DM
// channel, a console session or a subtask. It is the key of a task.
type ThreadRef struct {
	Platform Platform
	Team     string
	Channel  string
	Thread   string
}

// Task is one conversation. It owns a workspace directory.
type Task struct {
	ID           int64
	ParentTaskID int64 // 0: not a subtask
	Thread       ThreadRef
	OwnerUser    string
	Title        string
	Workspace    string
	CreatedAt    time.Time
	UpdatedAt    time.Time
}

// Role says who wrote a comment.
type Role string

// Comment roles.
const (
	RoleUser Role = "user"
	RoleBot  Role = "bot"
)

// Comment is one message in a task's thread, from a person or from the bot.
type Comment struct {
	ID            int64
	TaskID        int64
	PlatformMsgID string // unique within the task; "" for none
	AuthorID      string
	AuthorName    string
	Role          Role
	// Text is what the model reads: the message as people read it, the
	// platform's markup rewritten (mentions as @name, links, entities).
	Text string
	// Original is the message as the platform sent it, kept for audit when
	// it differs from Text; "" otherwise. It is never shown to the model.
	Original  string
	Files     []string // workspace-relative paths of attached files
	CreatedAt time.Time
}
