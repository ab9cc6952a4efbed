package api

import (
	"context"
	"crypto/rand"
	"io"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/chat"
)

var _ chat.Poster = Poster{}

// Poster is the api platform's chat.Poster. API clients read a task's
// thread with GET /api/tasks/{id} (the bot's answers and questions are the
// task's comments), so there is nowhere to deliver to: every call succeeds
// at once and the outbox deliverer settles the messages of API tasks. It is
// safe for concurrent use.
type Poster struct{}

// Post succeeds with a new message id.
func (Poster) Post(ctx context.Context, thread core.ThreadRef, text string) (string, error) {
	return "api-" + rand.Text(), nil
}

// Update succeeds.
func (Poster) Update(ctx context.Context, thread core.ThreadRef, msgID, text string) error {
	return nil
}

// React succeeds.
func (Poster) React(ctx context.Context, thread core.ThreadRef, msgID, emoji string, remove bool) error {
	return nil
}

// Upload succeeds with a new message id without reading r: the file stays
// in the task's workspace.
func (Poster) Upload(ctx context.Context, thread core.ThreadRef, name string, r io.Reader, size int64, comment string) (string, error) {
	return "api-" + rand.Text(), nil
}

// Limits are generous: nothing is split or sent as a file, and nothing
// waits between posts.
func (Poster) Limits() chat.Limits {
	return chat.Limits{Post: 1 << 24, Update: 1 << 24, MaxParts: 1 << 10}
}
