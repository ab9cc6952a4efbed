package discord

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bwmarrin/discordgo"
	"github.com/gorilla/websocket"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/chat"
)

// Service is the part of the conversation service (*chat.Service) the
// adapter calls. Implementations are safe for concurrent use.
type Service interface {
	HandleMessage(ctx context.Context, m chat.Message) (chat.Reply, error)
	HandleCommand(ctx context.Context, c chat.Command) (chat.Reply, error)
	HandleReaction(ctx context.Context, r chat.Reaction) (chat.Reply, error)
	// HandleAction runs a click on one of Baton's buttons; a non-empty
	// Reply is for the clicker alone.
	HandleAction(ctx context.Context, a chat.Action) (chat.Reply, error)
}

var _ Service = (*chat.Service)(nil)

// Config configures the adapter (the discord: configuration).
type Config struct {
	// Token is the bot token, with or without its "Bot " prefix. It is
	// never logged.
	Token string
	// APIURL is the REST base URL (discord.api_url); empty: Discord's.
	APIURL string
	// GuildID, when set, registers /baton in that guild only (at once)
	// instead of globally.
	GuildID string
	// RequireMention makes messages in a task's thread count only when
	// they mention the bot.
	RequireMention bool
	// IgnoreBots ignores messages of other bots (the bot's own are always
	// ignored).
	IgnoreBots bool
	Logger     *slog.Logger
	// Transport carries the HTTP requests; nil: http.DefaultTransport.
	Transport http.RoundTripper
	// Workers is how many messages and reactions are handled at once,
	// and separately how many /baton commands; default 16. Messages of
	// one channel are handled in order.
	Workers int
	// CommandWait is how long /baton may run before its answer is
	// deferred and sent when ready (default 2 s: Discord wants an answer
	// within 3 s of the interaction).
	CommandWait time.Duration
}

// Intents are the gateway intents Baton asks for. MessageContent is
// privileged: it must be enabled for the bot in the Developer Portal.
const Intents = discordgo.IntentsGuilds | discordgo.IntentsGuildMessages | discordgo.IntentMessageContent |
	discordgo.IntentsDirectMessages | discordgo.IntentsGuildMessageReactions

// Gateway close codes with advice for the operator.
const (
	closeAuthFailed        = 4004
	closeDisallowedIntents = 4014
)

// requestTimeout bounds one REST request.
const requestTimeout = 20 * time.Second

// laneQueue is how many events may wait in one lane before the gateway's
// reader waits for it.
const laneQueue = 64

// historyLimit is how many earlier messages of a thread a task starts with.
const historyLimit = 100

// Adapter is the Discord adapter: a discordgo session and its handlers. It
// implements chat.Poster. Its methods are safe for concurrent use; Run is
// called once.
type Adapter struct {
	svc Service
	cfg Config
	log *slog.Logger
	s   *discordgo.Session

	sem   chan struct{}                // one token per command being handled
	lanes []chan func(context.Context) // messages and reactions, by channel
	wg    sync.WaitGroup

	runMu   sync.Mutex
	stopped bool // guarded by runMu: Run is done, no more handlers start

	lastEvent atomic.Int64                    // unix nanoseconds of the last dispatch received
	botID     atomic.Pointer[string]          // the bot's user id, from READY
	appID     atomic.Pointer[string]          // the application's id, from READY
	ctx       atomic.Pointer[context.Context] // Run's context, for the handlers

	mu       sync.Mutex
	channels map[string]channelInfo // guarded by mu: channels looked up
}

// channelInfo is what the adapter needs of a channel.
type channelInfo struct {
	name   string
	guild  string
	parent string // for a thread: its channel
	thread bool
	dm     bool
}

// New returns an adapter that hands what people say to svc. It makes no
// network call: Run connects.
func New(svc Service, cfg Config) (*Adapter, error) {
	if svc == nil {
		return nil, errors.New("discord: no conversation service")
	}
	if strings.TrimSpace(cfg.Token) == "" {
		return nil, errors.New("discord: discord.bot_token is empty")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 16
	}
	if cfg.CommandWait <= 0 {
		cfg.CommandWait = 2 * time.Second
	}
	hc, err := client(cfg.APIURL, cfg.Transport)
	if err != nil {
		return nil, err
	}
	token := strings.TrimSpace(cfg.Token)
	if !strings.HasPrefix(token, "Bot ") {
		token = "Bot " + token
	}
	s, err := discordgo.New(token)
	if err != nil {
		return nil, fmt.Errorf("discord: session: %w", err)
	}
	s.Client = hc
	s.Identify.Intents = Intents
	// A 429 goes back to the outbox deliverer, which retries after the
	// time Discord names, instead of blocking a delivery slot here.
	s.ShouldRetryOnRateLimit = false
	// Handlers run on the gateway's reader; they hand the work to a
	// bounded set of goroutines.
	s.SyncEvents = true
	a := &Adapter{svc: svc, cfg: cfg, log: cfg.Logger.With("platform", "discord"), s: s,
		sem: make(chan struct{}, cfg.Workers), lanes: make([]chan func(context.Context), cfg.Workers),
		channels: map[string]channelInfo{}}
	for i := range a.lanes {
		a.lanes[i] = make(chan func(context.Context), laneQueue)
	}
	s.AddHandler(a.onEvent)
	s.AddHandler(a.onReady)
	s.AddHandler(a.onMessage)
	s.AddHandler(a.onReaction)
	s.AddHandler(a.onInteraction)
	return a, nil
}

// Run connects to the gateway, registers /baton and handles events until
// ctx ends; then it disconnects and waits for the events being handled.
// discordgo reconnects and resumes by itself. It returns an error when the
// first connection fails (a 4014 close means the Message Content intent is
// not enabled; the log says so).
func (a *Adapter) Run(ctx context.Context) error {
	a.ctx.Store(&ctx)
	for _, lane := range a.lanes {
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			for f := range lane {
				a.safely(ctx, f)
			}
		}()
	}
	defer a.stop()
	if err := a.s.Open(); err != nil {
		var ce *websocket.CloseError
		if errors.As(err, &ce) {
			switch ce.Code {
			case closeDisallowedIntents:
				a.log.Error("Discord refused the gateway intents (close 4014 Disallowed intent(s)): enable the Message Content intent for the bot in the Developer Portal (Applications → Baton → Bot → Privileged Gateway Intents → Message Content Intent), then restart")
				return fmt.Errorf("discord gateway: disallowed intents (enable the Message Content intent in the Developer Portal): %w", err)
			case closeAuthFailed:
				a.log.Error("Discord refused the bot token (close 4004 Authentication failed): check discord.bot_token / DISCORD_BOT_TOKEN")
				return fmt.Errorf("discord gateway: authentication failed: %w", err)
			}
		}
		return fmt.Errorf("discord gateway: open: %w", err)
	}
	a.log.Info("connected to the Discord gateway")
	if err := a.register(ctx); err != nil {
		a.log.Error("registering the /baton command failed; in-thread ! commands still work", "err", err)
	}
	<-ctx.Done()
	if err := a.s.Close(); err != nil {
		a.log.Warn("closing the Discord gateway", "err", err)
	}
	return nil
}

// stop lets no more events in and waits for those being handled.
func (a *Adapter) stop() {
	a.runMu.Lock()
	if !a.stopped {
		a.stopped = true
		for _, lane := range a.lanes {
			close(lane)
		}
	}
	a.runMu.Unlock()
	a.wg.Wait()
}

// LastEvent returns when the gateway was last heard from (a dispatch or a
// heartbeat acknowledgement), for /readyz and metrics; zero before Run
// connected. It never waits for a connection under way.
func (a *Adapter) LastEvent() time.Time {
	var last time.Time
	if n := a.lastEvent.Load(); n != 0 {
		last = time.Unix(0, n)
	}
	if a.botID.Load() == nil || !a.s.TryRLock() {
		return last // not connected yet, or discordgo is (re)connecting
	}
	ack := a.s.LastHeartbeatAck
	a.s.RUnlock()
	if ack.After(last) {
		return ack
	}
	return last
}

// botUser returns the bot's user id ("" before READY).
func (a *Adapter) botUser() string {
	if p := a.botID.Load(); p != nil {
		return *p
	}
	return ""
}

// runCtx is the context handlers work under.
func (a *Adapter) runCtx() context.Context {
	if p := a.ctx.Load(); p != nil {
		return *p
	}
	return context.Background()
}

// spawn runs f on a goroutine of its own, at most Workers at once, waiting
// for a free one: a burst slows the gateway's reader instead of piling up.
// Commands take this way so that one is never stuck behind a slow message
// (an attachment's download) and is answered within Discord's 3 seconds.
func (a *Adapter) spawn(f func(ctx context.Context)) {
	ctx := a.runCtx()
	select {
	case a.sem <- struct{}{}:
	case <-ctx.Done():
		return
	}
	a.runMu.Lock()
	defer a.runMu.Unlock()
	if a.stopped {
		<-a.sem
		return
	}
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		defer func() { <-a.sem }()
		a.safely(ctx, f)
	}()
}

// queue runs f in the lane of key (a channel id), after the events of that
// channel received before it; it waits while the lane is full.
func (a *Adapter) queue(key string, f func(ctx context.Context)) {
	ctx := a.runCtx()
	h := fnv.New32a()
	h.Write([]byte(key))
	lane := a.lanes[h.Sum32()%uint32(len(a.lanes))]
	a.runMu.Lock()
	defer a.runMu.Unlock()
	if a.stopped {
		return
	}
	select {
	case lane <- f:
	case <-ctx.Done():
	}
}

// safely runs f, turning a panic into a log line.
func (a *Adapter) safely(ctx context.Context, f func(ctx context.Context)) {
	defer func() {
		if r := recover(); r != nil {
			a.log.Error("handling a Discord event panicked", "panic", r)
		}
	}()
	f(ctx)
}

func (a *Adapter) onEvent(_ *discordgo.Session, e *discordgo.Event) {
	a.lastEvent.Store(time.Now().UnixNano())
}

func (a *Adapter) onReady(_ *discordgo.Session, r *discordgo.Ready) {
	if r.User != nil {
		id := r.User.ID
		a.botID.Store(&id)
		app := id
		if r.Application != nil && r.Application.ID != "" {
			app = r.Application.ID
		}
		a.appID.Store(&app)
	}
}

// channel returns what the adapter needs of a channel: from the gateway's
// state, else from the API (once).
func (a *Adapter) channel(ctx context.Context, id string) (channelInfo, error) {
	a.mu.Lock()
	info, ok := a.channels[id]
	a.mu.Unlock()
	if ok {
		return info, nil
	}
	c, err := a.s.State.Channel(id)
	if err != nil {
		if c, err = a.s.Channel(id, discordgo.WithContext(ctx)); err != nil {
			return channelInfo{}, fmt.Errorf("discord: look up channel %s: %w", id, err)
		}
	}
	info = infoOf(c)
	a.remember(id, info)
	return info, nil
}

func infoOf(c *discordgo.Channel) channelInfo {
	return channelInfo{name: c.Name, guild: c.GuildID, parent: c.ParentID, thread: c.IsThread(),
		dm: c.Type == discordgo.ChannelTypeDM || c.Type == discordgo.ChannelTypeGroupDM}
}

func (a *Adapter) remember(id string, info channelInfo) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.channels[id] = info
}

// author translates a Discord user (and their guild membership) into a
// chat.Author.
func author(u *discordgo.User, m *discordgo.Member) chat.Author {
	if u == nil && m != nil {
		u = m.User
	}
	if u == nil {
		return chat.Author{}
	}
	au := chat.Author{ID: "discord:" + u.ID, Name: u.Username, Bot: u.Bot}
	if u.GlobalName != "" {
		au.Name = u.GlobalName
	}
	if m != nil {
		if m.Nick != "" {
			au.Name = m.Nick
		}
		for _, r := range m.Roles {
			au.Groups = append(au.Groups, "discord-role:"+r)
		}
	}
	return au
}

// mentions reports whether m's text mentions the bot. Its Mentions are
// not enough: they list the author of the message a reply answers when
// the reply pings them.
func mentions(m *discordgo.Message, bot string) bool {
	return bot != "" && (strings.Contains(m.Content, "<@"+bot+">") || strings.Contains(m.Content, "<@!"+bot+">"))
}

// stripMention removes the bot's mentions from text.
func stripMention(text, bot string) string {
	text = strings.ReplaceAll(text, "<@"+bot+">", "")
	text = strings.ReplaceAll(text, "<@!"+bot+">", "")
	return strings.TrimSpace(text)
}

// ref is the thread of a channel: a Discord thread is keyed by its id under
// its parent channel; a DM channel is its own thread.
func ref(channelID string, info channelInfo) core.ThreadRef {
	if info.thread {
		return core.ThreadRef{Platform: core.PlatformDiscord, Team: info.guild, Channel: info.parent, Thread: channelID}
	}
	return core.ThreadRef{Platform: core.PlatformDiscord, Team: info.guild, Channel: channelID, Thread: channelID}
}
