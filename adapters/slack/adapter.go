package slack

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/chat"
	"github.com/baton-bot/baton/core/chattext"
	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"
)

// Service is the part of the conversation service (*chat.Service) the
// adapter hands Slack's events to. Implementations are safe for concurrent
// use and drop repeated deliveries themselves (by EventID and MsgID); a
// click handed over twice (a retry after a failure) changes nothing the
// second time (one decision per approval, no second abort).
type Service interface {
	HandleMessage(ctx context.Context, m chat.Message) (chat.Reply, error)
	HandleCommand(ctx context.Context, c chat.Command) (chat.Reply, error)
	HandleReaction(ctx context.Context, r chat.Reaction) (chat.Reply, error)
	// HandleAction runs a click on one of Baton's buttons; who may do
	// what is the service's to decide, never the adapter's.
	HandleAction(ctx context.Context, a chat.Action) (chat.Reply, error)
}

// Config configures an Adapter.
type Config struct {
	BotToken      string // xoxb-…: every Web API call
	AppToken      string // xapp-…: Socket Mode
	SigningSecret string // HTTP mode: verifies Slack's requests
	// APIURL is the Web API base URL; empty: Slack's.
	APIURL string
	// Mode is "socket" (Socket Mode, the default) or "http" (Events API).
	Mode string
	// RequireMention: a message in a task's thread is for Baton only when
	// it mentions the bot.
	RequireMention bool
	// IgnoreBots drops messages written by other bots.
	IgnoreBots bool
	Logger     *slog.Logger
	// HTTPClient makes the Web API calls and file downloads; nil: the
	// default client.
	HTTPClient *http.Client
	// Inbox keeps every event from before it is acknowledged until it is
	// handled (required; the store): an event is acknowledged only once
	// it is committed there, and one whose handling fails, or whose
	// process dies, is handled again from it.
	Inbox core.InboxStore
	// Workers is how many events are handed to the service at once
	// (default 8); Backlog how many acknowledged events may wait for a
	// worker (default 256) before new ones are refused (HTTP mode answers
	// 503, Socket Mode withholds the ack) and Slack sends them again.
	Workers int
	Backlog int
	// Groups are the Slack user groups the access lists name ("S0123" or
	// "slack-group:S0123"): an author's membership of each is looked up
	// (usergroups.users.list) and handed over in chat.Author.Groups. Other
	// groups are never looked up.
	Groups []string
	// GroupTTL is how long a group's members are cached (default 5
	// minutes).
	GroupTTL time.Duration
	// DrainTimeout bounds how long Run, once its context ends, goes on
	// handling the events already acknowledged (default 10 s): Slack does
	// not send an acknowledged event again.
	DrainTimeout time.Duration
	// CommandWait is how long a slash command may take before it is
	// answered "working on it" and its result sent to response_url later
	// (default 2.5 s: Slack wants an answer within 3 s).
	CommandWait time.Duration
	// Command is the slash command Baton answers (slack.command, default
	// "/baton"); any other command the app receives is answered with a
	// note naming this one.
	Command string
	// Locale is the language of the adapter's own answers (locale).
	Locale string
	// SweepEvery is how often the inbox is searched for due events: those
	// whose handling failed, and a dead process's (default 10 s).
	// RetryAfter is the wait before a failed handling's first retry,
	// doubling with each try up to 5 minutes (default 10 s). Both are
	// shortened by tests that wait for a retry.
	SweepEvery time.Duration
	RetryAfter time.Duration
}

// Modes.
const (
	ModeSocket = "socket"
	ModeHTTP   = "http"
)

// eventTimeout bounds the handling of one event (file downloads included).
const eventTimeout = 5 * time.Minute

// Inbox timing. An event is owned by the process that added or claimed it
// for inboxLease; the sweep claims those due (the process's own still
// running, which renews them, and a dead process's) every sweepEvery
// (Config.SweepEvery). A failed handling is tried again after retryAfter
// (Config.RetryAfter), doubling up to maxRetryWait, maxTries times in all
// (about 40 minutes).
const (
	inboxLease   = time.Minute
	sweepEvery   = 10 * time.Second
	retryAfter   = 10 * time.Second
	maxRetryWait = 5 * time.Minute
	maxTries     = 12
)

// acceptTimeout bounds the store write that must commit before an event
// is acknowledged: Slack wants an answer within 3 s.
const acceptTimeout = 2 * time.Second

// Adapter receives Slack's events and hands them to the conversation
// service. Run it (Run) for the workers and, in socket mode, the Socket
// Mode connection; in HTTP mode mount Handler as well. Its methods are safe
// for concurrent use.
type Adapter struct {
	svc    Service
	cfg    Config
	log    *slog.Logger
	api    *slack.Client
	poster *Poster
	http   *http.Client
	groups *groups
	users  *users

	work     chan core.InboxEvent // acknowledged events waiting for a worker
	commands chan struct{}        // one token per slash command running

	imu sync.Mutex
	// inflight: the keys of the inbox events in work or being handled
	// (guarded by imu). Keyed by Key, not ID: the store may give a new
	// event the id of one just removed, before its handler forgets it.
	inflight map[string]bool

	lastEvent atomic.Int64 // unix nanoseconds of the last event received

	gate   sync.RWMutex // held for reading while an event is added to work
	closed bool         // guarded by gate: Run is shutting down; work takes no more

	mu sync.Mutex
	me identity // guarded by mu; zero until auth.test answered
}

// identity is who the bot is, from auth.test.
type identity struct {
	user, bot, team string
}

// New returns an Adapter for svc. It checks cfg and makes no call to
// Slack; Run (or the first event) asks auth.test who the bot is.
func New(svc Service, cfg Config) (*Adapter, error) {
	if cfg.Mode == "" {
		cfg.Mode = ModeSocket
	}
	switch {
	case cfg.Inbox == nil:
		return nil, errors.New("slack: an inbox (the store) is required")
	case cfg.BotToken == "":
		return nil, errors.New("slack: a bot token (xoxb-…) is required")
	case cfg.Mode == ModeSocket && cfg.AppToken == "":
		return nil, errors.New("slack: socket mode needs an app token (xapp-…)")
	case cfg.Mode == ModeHTTP && cfg.SigningSecret == "":
		return nil, errors.New("slack: http mode needs the signing secret")
	case cfg.Mode != ModeSocket && cfg.Mode != ModeHTTP:
		return nil, fmt.Errorf("slack: unknown mode %q (socket or http)", cfg.Mode)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 8
	}
	if cfg.Backlog <= 0 {
		cfg.Backlog = 256
	}
	if cfg.GroupTTL <= 0 {
		cfg.GroupTTL = 5 * time.Minute
	}
	if cfg.DrainTimeout <= 0 {
		cfg.DrainTimeout = 10 * time.Second
	}
	if cfg.CommandWait <= 0 {
		cfg.CommandWait = 2500 * time.Millisecond
	}
	if cfg.Command == "" {
		cfg.Command = "/baton"
	}
	if cfg.SweepEvery <= 0 {
		cfg.SweepEvery = sweepEvery
	}
	if cfg.RetryAfter <= 0 {
		cfg.RetryAfter = retryAfter
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = http.DefaultClient
	}
	api := newClient(cfg)
	log := cfg.Logger.With("platform", "slack")
	return &Adapter{
		svc: svc, cfg: cfg, log: log, api: api, poster: &Poster{api: api}, http: hc,
		groups: newGroups(api, cfg.Groups, cfg.GroupTTL, log), users: newUsers(api, log),
		work: make(chan core.InboxEvent, cfg.Backlog), commands: make(chan struct{}, cfg.Workers),
		inflight: map[string]bool{},
	}, nil
}

// Poster returns the Poster delivering the outbox through the adapter's
// Web API client.
func (a *Adapter) Poster() *Poster { return a.poster }

// LastEvent returns when the last event arrived from Slack (zero before
// the first), for readiness checks and metrics.
func (a *Adapter) LastEvent() time.Time {
	n := a.lastEvent.Load()
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}

func (a *Adapter) touch() { a.lastEvent.Store(time.Now().UnixNano()) }

// Identify asks auth.test who the bot is. An error wrapping
// chat.ErrPermanent means the token is invalid or revoked.
func (a *Adapter) Identify(ctx context.Context) error {
	_, err := a.identity(ctx)
	return err
}

// identity returns the bot's identity, asking auth.test until it answers.
func (a *Adapter) identity(ctx context.Context) (identity, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.me.user != "" {
		return a.me, nil
	}
	r, err := a.api.AuthTestContext(ctx)
	if err != nil {
		return identity{}, classify("auth.test", err)
	}
	a.me = identity{user: r.UserID, bot: r.BotID, team: r.TeamID}
	return a.me, nil
}

// Run runs the event workers, the inbox sweep and, in socket mode, the
// Socket Mode connection, until ctx ends. It returns an error at once when
// Slack refuses the tokens.
//
// The sweep hands the workers the inbox's due events: at once on start
// (those an earlier process acknowledged and did not handle), then every
// SweepEvery (those whose handling failed, tried again with a growing
// wait).
//
// When ctx ends, the adapter takes no more events (HTTP mode answers 503,
// which Slack retries) and Run goes on handing the events it acknowledged
// already to the service, for up to DrainTimeout, before it returns. Events
// still waiting then stay in the inbox, due at once, for the next start.
func (a *Adapter) Run(ctx context.Context) error {
	if err := a.Identify(ctx); err != nil {
		if errors.Is(err, chat.ErrPermanent) {
			a.log.Error("slack refused the bot token; check SLACK_BOT_TOKEN", "err", err)
			return err
		}
		a.log.Warn("auth.test failed; will ask again on the first event", "err", err)
	}
	// Events are handled apart from ctx, so that those taken before the
	// end finish; hctx ends DrainTimeout after ctx.
	hctx, stopHandling := context.WithCancel(context.WithoutCancel(ctx))
	defer stopHandling()
	closed := make(chan struct{}) // closed once no event can be added to the backlog
	var wg sync.WaitGroup
	for range a.cfg.Workers {
		wg.Go(func() { a.worker(hctx, closed) })
	}
	var sweeping sync.WaitGroup
	sweeping.Go(func() { a.sweepLoop(ctx) })
	var err error
	if a.cfg.Mode == ModeSocket {
		err = a.runSocket(ctx)
	} else {
		<-ctx.Done()
	}
	sweeping.Wait()
	a.gate.Lock()
	a.closed = true
	a.gate.Unlock()
	close(closed)
	if n := len(a.work); n > 0 {
		a.log.Info("handling the slack events acknowledged before shutdown", "events", n, "within", a.cfg.DrainTimeout)
	}
	t := time.AfterFunc(a.cfg.DrainTimeout, stopHandling)
	defer t.Stop()
	wg.Wait()
	a.leave()
	return err
}

// leave hands the events still waiting for a worker back to the inbox,
// due at once, for the next start to handle.
func (a *Adapter) leave() {
	n := len(a.work)
	if n == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for range n {
		e := <-a.work
		a.done(e.Key)
		if err := a.cfg.Inbox.InboxRetry(ctx, e.ID, time.Now(), "shutdown before it was handled"); err != nil {
			a.log.Warn("shutdown: an acknowledged slack event stays in the inbox until its lease ends", "event", e.Key, "err", err)
		}
	}
	a.log.Warn("shutdown: acknowledged slack events not handled in time stay in the inbox for the next start", "events", n)
}

// worker hands queued events to the service until closed, then empties
// the backlog unless ctx ends first.
func (a *Adapter) worker(ctx context.Context, closed <-chan struct{}) {
	for ctx.Err() == nil {
		select {
		case e := <-a.work:
			a.handle(ctx, e)
		case <-closed:
			for ctx.Err() == nil {
				select {
				case e := <-a.work:
					a.handle(ctx, e)
				default:
					return // the backlog is empty
				}
			}
			return
		}
	}
}

// handle handles one inbox event and then removes it from the inbox, or,
// when that failed, records when to try again. A panic counts as a
// failure.
func (a *Adapter) handle(ctx context.Context, e core.InboxEvent) {
	defer a.done(e.Key)
	ectx, cancel := context.WithTimeout(ctx, eventTimeout)
	err := a.safely(ectx, e)
	cancel()
	// The inbox is told even when shutdown cut the handling short.
	bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	switch {
	case err == nil:
		if err := a.cfg.Inbox.InboxDone(bctx, e.ID); err != nil {
			// Handled again once due; the service drops the repeat.
			a.log.Warn("removing a handled slack event from the inbox failed", "event", e.Key, "err", err)
		}
		return
	case ctx.Err() != nil:
		err = a.cfg.Inbox.InboxRetry(bctx, e.ID, time.Now(), "shutdown while it was handled")
	case e.Tries >= maxTries:
		a.log.Error("a slack event failed every try; given up", "event", e.Key, "tries", e.Tries, "err", err)
		err = a.cfg.Inbox.InboxDone(bctx, e.ID)
	default:
		wait := min(a.cfg.RetryAfter<<(e.Tries-1), maxRetryWait)
		a.log.Warn("handling a slack event failed; it will be tried again", "event", e.Key, "try", e.Tries, "in", wait, "err", err)
		err = a.cfg.Inbox.InboxRetry(bctx, e.ID, time.Now().Add(wait), err.Error())
	}
	if err != nil {
		a.log.Warn("recording a slack event's outcome in the inbox failed; it is tried again once its lease ends", "event", e.Key, "err", err)
	}
}

// safely reads e's payload back and handles it, turning a panic into an
// error. The payload is an Events API event, or a block_actions
// interaction (a click on a button): their type tells them apart.
func (a *Adapter) safely(ctx context.Context, e core.InboxEvent) (err error) {
	defer func() {
		if r := recover(); r != nil {
			a.log.Error("handling a slack event panicked", "event", e.Key, "panic", r)
			err = fmt.Errorf("handling panicked: %v", r)
		}
	}()
	if interactive(e.Payload) {
		var ic slack.InteractionCallback
		if err := json.Unmarshal(e.Payload, &ic); err != nil {
			a.log.Error("an interaction in the inbox is not readable; dropped", "event", e.Key, "err", err)
			return nil
		}
		return a.interaction(ctx, ic)
	}
	ev, err := slackevents.ParseEvent(json.RawMessage(e.Payload), slackevents.OptionNoVerifyToken())
	if err != nil {
		a.log.Error("an event in the inbox is not readable; dropped", "event", e.Key, "err", err)
		return nil
	}
	return a.event(ctx, ev)
}

// Reasons take refuses an event; Slack sends it again.
var (
	errBacklogFull = errors.New("slack event backlog full")
	errClosed      = errors.New("slack adapter shutting down")
)

// take records an event (or an interaction) in the inbox under key and
// hands it to the workers without waiting; only when it returns nil may
// it be acknowledged. An empty key is the payload's SHA-256. It fails
// when the backlog is full, Run is shutting down, or the inbox write did
// not commit (and reach the disk, see record) within acceptTimeout. An event under a key still in the inbox
// is acknowledged and not handed over again: whoever holds it handles it.
// When the backlog filled up meanwhile and has no room before the deadline
// either, the event is left to the next sweep.
func (a *Adapter) take(ctx context.Context, key string, payload []byte) error {
	a.gate.RLock()
	defer a.gate.RUnlock()
	if a.closed {
		return errClosed
	}
	if len(a.work) == cap(a.work) {
		return errBacklogFull
	}
	if key == "" {
		sum := sha256.Sum256(payload)
		key = "sha256:" + hex.EncodeToString(sum[:])
	}
	ctx, cancel := context.WithTimeout(ctx, acceptTimeout)
	defer cancel()
	now := time.Now()
	e, first, durable, err := a.record(ctx, core.InboxEvent{
		Platform: core.PlatformSlack, Key: key, Payload: payload, ReceivedAt: now, DueAt: now.Add(inboxLease),
	})
	if err != nil {
		return fmt.Errorf("record the event: %w", err)
	}
	if !first {
		a.log.Debug("slack event already in the inbox", "event", key)
		return durable(ctx)
	}
	if !a.offer(ctx, e) {
		// The backlog filled up meanwhile: the next sweep takes the
		// event, rather than the end of its lease.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), acceptTimeout)
		defer cancel()
		if err := a.cfg.Inbox.InboxRetry(rctx, e.ID, now, ""); err != nil {
			a.log.Warn("a slack event waits for its lease to end", "event", key, "err", err)
		}
	}
	// Handed over, the event is worked on while the disk catches up; the
	// acknowledgement waits for it. When it fails, Slack sends the event
	// again, which finds it in the inbox and is not handed over twice.
	if err := durable(ctx); err != nil {
		return fmt.Errorf("record the event: %w", err)
	}
	return nil
}

// record adds e to the inbox and returns durable, which returns once e
// may be acknowledged: with a store that can hand an event over before it
// is on disk (core.InboxStager), once it is; else at once, AddInbox having
// waited for it.
func (a *Adapter) record(ctx context.Context, e core.InboxEvent) (core.InboxEvent, bool, func(context.Context) error, error) {
	if st, ok := a.cfg.Inbox.(core.InboxStager); ok {
		return st.StageInbox(ctx, e)
	}
	e, first, err := a.cfg.Inbox.AddInbox(ctx, e)
	return e, first, func(context.Context) error { return nil }, err
}

// offer hands e to the workers, waiting for room in the backlog until ctx
// ends, unless it is being handled already; it reports whether e was
// handed over.
func (a *Adapter) offer(ctx context.Context, e core.InboxEvent) bool {
	a.imu.Lock()
	if a.inflight[e.Key] {
		a.imu.Unlock()
		return false
	}
	a.inflight[e.Key] = true
	a.imu.Unlock()
	select {
	case a.work <- e:
		return true
	default:
	}
	select {
	case a.work <- e:
		return true
	case <-ctx.Done():
		a.done(e.Key)
		return false
	}
}

// done forgets that the event under key is being handled.
func (a *Adapter) done(key string) {
	a.imu.Lock()
	defer a.imu.Unlock()
	delete(a.inflight, key)
}

// sweepLoop hands the workers the inbox's due events, at once and every
// SweepEvery, until ctx ends.
func (a *Adapter) sweepLoop(ctx context.Context) {
	t := time.NewTicker(a.cfg.SweepEvery)
	defer t.Stop()
	for {
		a.sweep(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// sweep claims as many due events as the backlog has room for and hands
// over those not being handled already (claiming those renews their
// lease).
func (a *Adapter) sweep(ctx context.Context) {
	a.gate.RLock()
	defer a.gate.RUnlock()
	room := cap(a.work) - len(a.work)
	if a.closed || room == 0 {
		return
	}
	es, err := a.cfg.Inbox.ClaimInbox(ctx, core.PlatformSlack, time.Now(), inboxLease, room)
	if err != nil {
		if ctx.Err() == nil {
			a.log.Warn("reading the slack inbox failed", "err", err)
		}
		return
	}
	n := 0
	full, cancel := context.WithCancel(ctx)
	cancel() // the sweep never waits for room: it claimed no more than there was
	for _, e := range es {
		if a.offer(full, e) {
			n++
		}
	}
	if n > 0 {
		a.log.Info("handling slack events from the inbox", "events", n)
	}
}

// eventKey is the inbox key of an Events API event: its event_id ("" when
// it has none).
func eventKey(cb *slackevents.EventsAPICallbackEvent) string {
	if cb == nil {
		return ""
	}
	return cb.EventID
}

// event handles one Events API event (already acknowledged). An error
// means it was not handled and should be tried again: the bot's identity
// unknown, or the service failing.
func (a *Adapter) event(ctx context.Context, ev slackevents.EventsAPIEvent) error {
	cb, _ := ev.Data.(*slackevents.EventsAPICallbackEvent)
	eventID := ""
	if cb != nil {
		eventID = cb.EventID
	}
	me, err := a.identity(ctx)
	if err != nil {
		return fmt.Errorf("who the bot is: %w", err)
	}
	team := ev.TeamID
	if team == "" {
		team = me.team
	}
	switch e := ev.InnerEvent.Data.(type) {
	case *slackevents.AppMentionEvent:
		if e.Edited != nil || a.ignored(me, e.User, e.BotID) {
			return nil
		}
		m := a.message(ctx, me, team, eventID, e.Channel, e.User, e.BotID, text(e.Text, e.Blocks), e.TimeStamp, e.ThreadTimeStamp, e.Files)
		m.Addressed = true
		return a.deliver(ctx, m)
	case *slackevents.MessageEvent:
		return a.messageEvent(ctx, me, team, eventID, e)
	case *slackevents.ReactionAddedEvent:
		if e.User == "" || e.User == me.user || e.Item.Type != "message" {
			return nil
		}
		root := e.Item.Timestamp // in a channel, only a reaction on a thread's root matters
		if isDirect(e.Item.Channel) {
			root = e.Item.Channel // a direct-message channel is one thread
		}
		r := chat.Reaction{
			Thread: core.ThreadRef{Platform: core.PlatformSlack, Team: team, Channel: e.Item.Channel, Thread: root},
			MsgID:  e.Item.Timestamp, Emoji: e.Reaction, Author: a.author(ctx, e.User, ""),
		}
		reply, err := a.svc.HandleReaction(ctx, r)
		if err != nil {
			return fmt.Errorf("handle a reaction: %w", err)
		}
		a.answer(ctx, r.Thread, e.User, reply)
	default:
		a.log.Debug("slack event ignored", "type", ev.InnerEvent.Type)
	}
	return nil
}

// messageEvent handles a message event: a direct message, a message in a
// thread, or one mentioning the bot.
func (a *Adapter) messageEvent(ctx context.Context, me identity, team, eventID string, e *slackevents.MessageEvent) error {
	switch e.SubType {
	case "", "file_share", "thread_broadcast":
	default:
		return nil // edits, deletions, joins, bot_message, …
	}
	if a.ignored(me, e.User, e.BotID) {
		return nil
	}
	var files []slack.File
	if e.Message != nil {
		files = e.Message.Files
	}
	raw := text(e.Text, e.Blocks)
	mentioned := me.user != "" && strings.Contains(raw, "<@"+me.user)
	comment := e.ThreadTimeStamp != "" && e.ThreadTimeStamp != e.TimeStamp && !a.cfg.RequireMention
	if e.ChannelType != "im" && !mentioned && !comment {
		return nil // a channel message not for Baton
	}
	m := a.message(ctx, me, team, eventID, e.Channel, e.User, e.BotID, raw, e.TimeStamp, e.ThreadTimeStamp, files)
	switch {
	case e.ChannelType == "im":
		m.Thread.Thread = e.Channel // a direct-message channel is one thread
		m.Addressed, m.Direct, m.History = true, true, nil
	case mentioned:
		m.Addressed = true
	default:
		// A comment if the thread is a task's; not Addressed, so that a
		// thread Baton was never asked into does not become a task.
	}
	return a.deliver(ctx, m)
}

// isDirect reports a direct-message channel, by its id: Slack gives DM
// channels ids starting with D (reaction_added carries no channel type).
func isDirect(channel string) bool { return strings.HasPrefix(channel, "D") }

// slackbot is the user id of Slackbot, which posts reminders, notices and
// custom responses as a person would, without a bot_id.
const slackbot = "USLACKBOT"

// ignored reports a message Baton must not act on: its own, Slackbot's, a
// system notice's (no author), or another bot's when IgnoreBots is set.
func (a *Adapter) ignored(me identity, user, bot string) bool {
	if user != "" && user == me.user || bot != "" && bot == me.bot || user == slackbot {
		return true
	}
	return bot != "" && a.cfg.IgnoreBots || user == "" && bot == ""
}

// text is a message's text, or its rich_text blocks in the same markup
// when the text is empty.
func text(t string, blocks slack.Blocks) string {
	if strings.TrimSpace(t) == "" {
		return richText(blocks)
	}
	return t
}

// message builds the Message of a Slack message in channel, its text
// (Slack's markup) made readable.
func (a *Adapter) message(ctx context.Context, me identity, team, eventID, channel, user, bot, text, ts, threadTS string, files []slack.File) chat.Message {
	root := threadTS
	if root == "" {
		root = ts
	}
	names := a.users.lookup(ctx)
	au := a.author(ctx, user, bot)
	if bot == "" {
		au.Name, _ = names(user)
	}
	m := chat.Message{
		Thread:  core.ThreadRef{Platform: core.PlatformSlack, Team: team, Channel: channel, Thread: root},
		Channel: "slack:" + channel,
		MsgID:   ts,
		EventID: eventID,
		Author:  au,
		Text:    readable(text, me.user, names),
		At:      tsTime(ts),
	}
	m.Original = original(text, m.Text)
	for _, f := range files {
		m.Files = append(m.Files, a.file(ctx, f))
	}
	if threadTS != "" && threadTS != ts {
		m.History = func(ctx context.Context) ([]chat.Message, error) { return a.history(ctx, me, team, channel, threadTS) }
	}
	return m
}

// author is the chat.Author of a message's writer: a person's carries
// the user groups of theirs that the access lists name.
func (a *Adapter) author(ctx context.Context, user, bot string) chat.Author {
	au := chat.Author{ID: "slack:" + user, Bot: bot != ""}
	if bot == "" {
		au.Groups = a.groups.of(ctx, user)
	}
	return au
}

// deliver hands m to the service and shows its reply to the author.
func (a *Adapter) deliver(ctx context.Context, m chat.Message) error {
	reply, err := a.svc.HandleMessage(ctx, m)
	if err != nil {
		return fmt.Errorf("handle message %s in %s: %w", m.MsgID, m.Thread.Channel, err)
	}
	a.answer(ctx, m.Thread, strings.TrimPrefix(m.Author.ID, "slack:"), reply)
	return nil
}

// answer shows a service's reply: in the thread when public, else to user
// alone (chat.postEphemeral).
func (a *Adapter) answer(ctx context.Context, thread core.ThreadRef, user string, r chat.Reply) {
	if strings.TrimSpace(r.Text) == "" {
		return
	}
	if r.Public {
		if _, err := a.poster.Post(ctx, thread, r.Text); err != nil {
			a.log.Warn("posting a reply failed", "channel", thread.Channel, "err", err)
		}
		return
	}
	opts := postOptions(thread, render(r.Text))
	if _, err := a.api.PostEphemeralContext(ctx, thread.Channel, user, opts...); err != nil {
		a.log.Warn("posting an ephemeral reply failed", "channel", thread.Channel, "err", classify("chat.postEphemeral", err))
	}
}

// history fetches the earlier messages of a thread (conversations.replies,
// one page of up to 200).
func (a *Adapter) history(ctx context.Context, me identity, team, channel, threadTS string) ([]chat.Message, error) {
	msgs, _, _, err := a.api.GetConversationRepliesContext(ctx, &slack.GetConversationRepliesParameters{ChannelID: channel, Timestamp: threadTS, Limit: 200})
	if err != nil {
		return nil, classify("conversations.replies", err)
	}
	out := make([]chat.Message, 0, len(msgs))
	names := a.users.lookup(ctx) // one budget for the whole thread
	for _, h := range msgs {
		user := h.User
		if user == "" {
			user = h.BotID
		}
		au := chat.Author{ID: "slack:" + user, Name: h.Username, Bot: h.BotID != "" || h.User == me.user}
		if !au.Bot && h.User != "" {
			au.Name, _ = names(h.User)
		}
		raw := text(h.Text, h.Blocks)
		plain := readable(raw, me.user, names)
		out = append(out, chat.Message{
			Thread:   core.ThreadRef{Platform: core.PlatformSlack, Team: team, Channel: channel, Thread: threadTS},
			Channel:  "slack:" + channel,
			MsgID:    h.Timestamp,
			Author:   au,
			Text:     plain,
			Original: original(raw, plain),
			At:       tsTime(h.Timestamp),
		})
	}
	return out, nil
}

// file describes an attachment; Open downloads it with the bot token.
//
// A file shared from another organisation through Slack Connect arrives as
// a stub without links (file_access: check_file_info): files.info is asked
// for the file first. Only when that fails too does Open fail, saying why,
// and the thread hears it.
func (a *Adapter) file(ctx context.Context, f slack.File) chat.File {
	var infoErr error
	if f.URLPrivateDownload == "" && f.URLPrivate == "" && f.ID != "" {
		info, _, _, err := a.api.GetFileInfoContext(ctx, f.ID, 0, 0)
		switch {
		case err != nil:
			infoErr = classify("files.info", err)
			a.log.Warn("slack would not describe a shared file", "file", f.ID, "file_access", f.FileAccess, "err", infoErr)
		case info != nil:
			f = *info
		}
	}
	url := f.URLPrivateDownload
	if url == "" {
		url = f.URLPrivate
	}
	name := f.Name
	if name == "" {
		name = f.ID
	}
	size := int64(f.Size)
	if size <= 0 {
		size = -1
	}
	return chat.File{Name: name, Size: size, Open: func(ctx context.Context) (io.ReadCloser, error) {
		switch {
		case infoErr != nil:
			return nil, fmt.Errorf("slack did not let Baton read it (%w)", infoErr)
		case url == "":
			return nil, errors.New("slack gave no download link")
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return nil, fmt.Errorf("download %s: %w", name, err)
		}
		req.Header.Set("Authorization", "Bearer "+a.cfg.BotToken)
		resp, err := a.http.Do(req)
		if err != nil {
			return nil, fmt.Errorf("download %s: %w", name, err)
		}
		if resp.StatusCode != http.StatusOK {
			resp.Body.Close()
			return nil, fmt.Errorf("download %s: slack answered %s", name, resp.Status)
		}
		return resp.Body, nil
	}}
}

// readable is the text of a message as people read it: the mentions of
// the bot (user id bot) removed, and Slack's markup rewritten
// (chattext.Readable), users named by names.
func readable(text, bot string, names func(string) (string, bool)) string {
	return strings.TrimSpace(chattext.Readable(chattext.Slack, stripMention(text, bot), chattext.Refs{User: names}))
}

// original is the text of chat.Message.Original: raw, unless it reads as
// plain already.
func original(raw, plain string) string {
	if strings.TrimSpace(raw) == plain {
		return ""
	}
	return raw
}

// mentionRE matches a mention of a user, with or without a label.
var mentionRE = regexp.MustCompile(`<@([A-Z0-9]+)(\|[^>]*)?>`)

// stripMention removes the mentions of the bot (user id bot) from text.
func stripMention(text, bot string) string {
	if bot == "" {
		return strings.TrimSpace(text)
	}
	text = mentionRE.ReplaceAllStringFunc(text, func(s string) string {
		if mentionRE.FindStringSubmatch(s)[1] == bot {
			return ""
		}
		return s
	})
	return strings.TrimSpace(text)
}

// tsTime parses a Slack ts ("1700000000.000100"); zero when it is not one.
func tsTime(ts string) time.Time {
	sec, frac, _ := strings.Cut(ts, ".")
	s, err := strconv.ParseInt(sec, 10, 64)
	if err != nil {
		return time.Time{}
	}
	us, _ := strconv.ParseInt((frac + "000000")[:6], 10, 64)
	return time.Unix(s, us*1000)
}
