package outbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/chat"
	"github.com/baton-bot/baton/core/chattext"
	"github.com/baton-bot/baton/core/workspace"
)

// longName is the file a text too long for MaxParts posts is uploaded as.
const longName = "answer.md"

// longComment goes with a text uploaded as a file: one line, so that the
// thread shows what the file is.
const longComment = "The answer is too long for a few messages, so here it is as a file."

// permanent marks err as one that retrying cannot fix.
func permanent(format string, args ...any) error {
	return fmt.Errorf("%w: %s", chat.ErrPermanent, fmt.Sprintf(format, args...))
}

// send performs m on the platform and returns the platform's id of the
// message it made or changed ("" for reactions). A panic in the Poster is
// returned as an error, retried like any other.
func (d *Deliverer) send(ctx context.Context, task core.Task, m core.OutboxMessage) (id string, err error) {
	defer func() {
		if r := recover(); r != nil {
			id, err = "", fmt.Errorf("%s: poster panicked: %v", m.Kind, r)
		}
	}()
	p, err := chat.DecodePayload(m.Payload)
	if err != nil {
		return "", fmt.Errorf("%w: %w", chat.ErrPermanent, err)
	}
	switch m.Kind {
	case core.OutboxPost:
		return d.post(ctx, task.Thread, m, p.Text, p.Buttons)
	case core.OutboxUpdate:
		if p.Progress != nil {
			return d.progress(ctx, task, m, p)
		}
		return d.update(ctx, task, m, p)
	case core.OutboxReact, core.OutboxUnreact:
		return d.react(ctx, task.Thread, p, m.Kind == core.OutboxUnreact)
	case core.OutboxUpload:
		return d.upload(ctx, task, m, p)
	default:
		return "", permanent("unknown outbox kind %q", m.Kind)
	}
}

// post posts text, m's, in parts of at most Limits().Post characters, or
// as a file when that takes more than MaxParts posts. A retry after a
// failure mid-way goes on with the first part not delivered. It returns
// the id of the first part. Buttons go with the last part, where the
// platform shows them.
//
// When an earlier delivery of m may have posted parts (uncertain), each
// part from the first this deliverer did not post itself is looked up by
// its key before it is posted, until one is not found: parts are posted
// in order, so none after it was.
func (d *Deliverer) post(ctx context.Context, thread core.ThreadRef, m core.OutboxMessage, text string, buttons []chat.Button) (string, error) {
	id := m.ID
	lim := d.poster.Limits()
	parts := d.split(text, lim.Post)
	if len(parts) == 0 {
		return "", permanent("empty post")
	}
	maxParts := lim.MaxParts
	if maxParts <= 0 {
		maxParts = DefaultMaxParts
	}
	if len(parts) > maxParts {
		var msgID string
		err := d.pace.do(ctx, thread, d.cfg.Now, lim.Every, func() (err error) {
			msgID, err = d.poster.Upload(ctx, thread, longName, strings.NewReader(text), int64(len(text)), longComment)
			return err
		})
		if err != nil {
			return "", fmt.Errorf("upload long text: %w", err)
		}
		return msgID, nil
	}

	d.mu.Lock()
	pr := d.parts[id]
	d.mu.Unlock()
	look := uncertain(m)
	for i := pr.done; i < len(parts); i++ {
		var partButtons []chat.Button
		if i == len(parts)-1 {
			partButtons = buttons
		}
		key := partKey(id, i+1)
		msgID, found, err := "", false, error(nil)
		if look {
			msgID, found, err = d.find(ctx, thread, key)
			if err != nil {
				return "", fmt.Errorf("look for part %d of %d posted before: %w", i+1, len(parts), err)
			}
			look = found
		}
		if !found {
			err = d.pace.do(ctx, thread, d.cfg.Now, lim.Every, func() (err error) {
				msgID, err = d.postPart(ctx, thread, parts[i], partButtons, key)
				return err
			})
		}
		if err != nil {
			return "", fmt.Errorf("post part %d of %d: %w", i+1, len(parts), err)
		}
		if i == 0 {
			pr.firstID = msgID
		}
		pr.done = i + 1
		if len(parts) > 1 {
			d.mu.Lock()
			d.parts[id] = pr
			d.mu.Unlock()
		}
	}
	return pr.firstID, nil
}

// uncertain reports whether an earlier delivery of m may have reached
// the platform: m was claimed before, and that delivery failed without
// saying it posted nothing, or never ended.
func uncertain(m core.OutboxMessage) bool { return m.Claims > 1 }

// partKey names part (from 1) of outbox message id on the platform
// (chat.KeyedPoster): stable across deliveries and deliverers, and short
// enough for Discord's 25-character nonce.
func partKey(id int64, part int) string {
	return fmt.Sprintf("%d.%d", id, part)
}

// postPart posts one part with buttons (none: a plain post): keyed when
// the poster takes keys.
func (d *Deliverer) postPart(ctx context.Context, thread core.ThreadRef, text string, buttons []chat.Button, key string) (string, error) {
	if kp, ok := d.poster.(chat.KeyedPoster); ok {
		return kp.PostKeyed(ctx, thread, text, buttons, key)
	}
	if bp, ok := d.poster.(chat.ButtonPoster); ok && len(buttons) > 0 {
		return bp.PostButtons(ctx, thread, text, buttons)
	}
	return d.poster.Post(ctx, thread, text)
}

// find looks up the post key names, when the poster can
// (chat.DeliveryFinder); found is false when it cannot.
func (d *Deliverer) find(ctx context.Context, thread core.ThreadRef, key string) (msgID string, found bool, err error) {
	f, ok := d.poster.(chat.DeliveryFinder)
	if !ok {
		return "", false, nil
	}
	msgID, found, err = f.FindDelivered(ctx, thread, key)
	if found {
		d.log.Info("found the post an earlier delivery made; not posting it again", "key", key, "platform_msg_id", msgID)
	}
	return msgID, found, err
}

// split cuts text with the configured splitter and makes sure, whatever
// that splitter does, that no part is over limit characters.
func (d *Deliverer) split(text string, limit int) []string {
	if strings.TrimSpace(text) == "" {
		return nil
	}
	if limit <= 0 {
		return []string{text}
	}
	var out []string
	for _, p := range d.cfg.Split(text, limit) {
		if runeLen(p) > limit {
			out = append(out, Split(p, limit)...)
			continue
		}
		if strings.TrimSpace(p) != "" {
			out = append(out, p)
		}
	}
	return out
}

// update shows p in the message m.Ref names (the job's status message
// when it names none): it posts the message the first time and edits it
// afterwards. It returns the message's id, so that the store finds it for
// the later updates. On a ButtonPoster every update goes with p's buttons,
// none removing those the message had.
func (d *Deliverer) update(ctx context.Context, task core.Task, m core.OutboxMessage, p chat.Payload) (string, error) {
	thread, text := task.Thread, p.Text
	what := fmt.Sprintf("status of job %d", m.JobID)
	if m.Ref != "" {
		what = fmt.Sprintf("message %s", m.Ref)
	} else if m.JobID == 0 {
		return "", permanent("status update without a job")
	}
	if strings.TrimSpace(text) == "" {
		return "", permanent("empty update of %s", what)
	}
	bp, buttons := d.poster.(chat.ButtonPoster)
	lim := d.poster.Limits()
	key := partKey(m.ID, 1)
	var id string
	var err error
	if m.Ref != "" {
		id, err = d.store.RefMessage(ctx, task.ID, m.Ref)
	} else {
		id, err = d.store.StatusMessage(ctx, m.JobID)
	}
	if errors.Is(err, core.ErrNotFound) {
		if lim.Post > 0 {
			text = cutRunes(text, lim.Post)
		}
		if uncertain(m) {
			msgID, found, err := d.find(ctx, thread, key)
			if err != nil {
				return "", fmt.Errorf("look for %s posted before: %w", what, err)
			}
			if found {
				return msgID, nil
			}
		}
		var msgID string
		err := d.pace.do(ctx, thread, d.cfg.Now, lim.Every, func() (err error) {
			msgID, err = d.postPart(ctx, thread, text, p.Buttons, key)
			return err
		})
		if err != nil {
			return "", fmt.Errorf("post %s: %w", what, err)
		}
		return msgID, nil
	}
	if err != nil {
		return "", fmt.Errorf("find %s: %w", what, err)
	}
	n := lim.Update
	if n <= 0 {
		n = lim.Post
	}
	if n > 0 {
		text = cutBytes(text, n)
	}
	if buttons {
		err = bp.UpdateButtons(ctx, thread, id, text, p.Buttons)
	} else {
		err = d.poster.Update(ctx, thread, id, text)
	}
	if err != nil {
		return "", fmt.Errorf("update %s: %w", what, err)
	}
	return id, nil
}

// react adds or removes an emoji; an empty MsgID means the thread's root
// message, the one that started the task.
func (d *Deliverer) react(ctx context.Context, thread core.ThreadRef, p chat.Payload, remove bool) (string, error) {
	if p.Emoji == "" {
		return "", permanent("reaction without an emoji")
	}
	msgID := p.MsgID
	if msgID == "" {
		msgID = thread.Thread
	}
	if err := d.poster.React(ctx, thread, msgID, p.Emoji, remove); err != nil {
		return "", fmt.Errorf("react %s on %s: %w", p.Emoji, msgID, err)
	}
	return "", nil
}

// upload posts a file of the task's workspace. The path must be absolute
// and inside the workspace, symlinks included, and name a regular file (a
// named pipe is refused, not waited on); a file that cannot be opened is a
// permanent failure. A file over MaxFileBytes is not sent: a note saying so
// is posted in its place (the file may have grown since the upload was
// written). The name shown on the platform and the comment, a one-line
// label, are neutralised as names are (chattext.NeutralizeName).
func (d *Deliverer) upload(ctx context.Context, task core.Task, m core.OutboxMessage, p chat.Payload) (string, error) {
	if !filepath.IsAbs(p.Path) {
		return "", permanent("upload path %q is not absolute", p.Path)
	}
	if task.Workspace == "" {
		return "", permanent("upload from task %d, which has no workspace", task.ID)
	}
	rel, err := filepath.Rel(filepath.Clean(task.Workspace), filepath.Clean(p.Path))
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", permanent("upload path %q is outside the task's workspace", p.Path)
	}
	ws, err := workspace.OpenExisting(task.Workspace)
	if err != nil {
		return "", permanent("open workspace of task %d: %v", task.ID, err)
	}
	defer ws.Close()
	rel = filepath.ToSlash(rel)
	f, st, err := ws.OpenRead(rel)
	if err != nil {
		return "", permanent("open upload: %v", err)
	}
	defer f.Close()
	if limit := d.cfg.MaxFileBytes; limit > 0 && st.Size() > limit {
		d.log.Info("an upload is over the size limit; posting a note instead", "task_id", task.ID, "file", rel, "bytes", st.Size(), "limit", limit)
		return d.post(ctx, task.Thread, m, chat.UploadTooLarge(d.cfg.Locale, rel, st.Size(), limit), nil)
	}
	plat := textPlatform(task.Thread.Platform)
	name := chattext.NeutralizeName(p.Name, plat)
	if name == "" {
		name = chattext.NeutralizeName(filepath.Base(p.Path), plat)
	}
	if name == "" {
		name = "file"
	}
	comment := chattext.NeutralizeName(p.Text, plat)
	var msgID string
	if fp, ok := d.poster.(chat.FilePoster); ok {
		msgID, err = fp.PostFile(ctx, task.Thread, p.Path, st.Size(), comment)
		if err != nil {
			return "", fmt.Errorf("post file %s: %w", name, err)
		}
		return msgID, nil
	}
	err = d.pace.do(ctx, task.Thread, d.cfg.Now, d.poster.Limits().Every, func() (err error) {
		// The file may grow after the check: the platform gets no more
		// than the size checked and announced.
		msgID, err = d.poster.Upload(ctx, task.Thread, name, io.LimitReader(f, st.Size()), st.Size(), comment)
		return err
	})
	if err != nil {
		return "", fmt.Errorf("upload %s: %w", name, err)
	}
	return msgID, nil
}

// textPlatform is the chattext platform of a thread's platform: Plain,
// inert everywhere, for those Baton renders no text for.
func textPlatform(p core.Platform) chattext.Platform {
	switch p {
	case core.PlatformSlack:
		return chattext.Slack
	case core.PlatformDiscord:
		return chattext.Discord
	}
	return chattext.Plain
}
