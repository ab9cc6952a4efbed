// Package discordfake is a fake of Discord's REST API and gateway, as far as
// Baton's Discord adapter uses them, for tests. A test starts one with New,
// points the adapter's Config.APIURL at APIURL(), dispatches gateway events
// with Dispatch, and afterwards asserts on what the bot did (Posts,
// Reactions, Threads, Answers, …):
//
//	f := discordfake.New(t)
//	a, _ := discord.New(svc, discord.Config{Token: "t", APIURL: f.APIURL(), GuildID: discordfake.Guild})
//	go a.Run(ctx)
//	f.Dispatch("MESSAGE_CREATE", map[string]any{…})
//	… wait until f.Posts() holds the answer …
//
// The fake knows one guild (Guild) with one text channel (Text), a DM
// channel (DM), a bot user (Bot) and an application (App). Its gateway
// speaks the handshake (hello, identify, READY, GUILD_CREATE) and
// acknowledges heartbeats; it neither resumes nor checks the token. Some
// ids answer with Discord's errors: see NoThreads, Forbidden, Unknown and
// LateInteraction. Events, and the earlier messages of a channel, are
// Discord's JSON objects as maps; what the bot sent is recorded typed.
//
// It imports nothing of Baton, so tests of the adapter and whole-system
// tests share it.
package discordfake

import (
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// Ids of the fake's fixed things.
const (
	Bot   = "900" // the bot's user
	App   = "901" // the bot's application
	Guild = "100" // the one guild
	Text  = "200" // a text channel of Guild, named "general"
	DM    = "300" // a DM channel
)

// Ids the fake answers with Discord's errors.
const (
	// NoThreads is a channel in which starting a thread is refused with
	// 403 Missing Permissions (50013). Add it with AddChannel to post a
	// message there.
	NoThreads = "210"
	// Forbidden is a channel where posting is refused with 403 Missing
	// Permissions (50013).
	Forbidden = "403"
	// Unknown is a channel where posting is refused with 404 Unknown
	// Channel (10003).
	Unknown = "404"
	// LateInteraction is an interaction id whose response is refused with
	// 404 Unknown interaction (10062), as Discord does after 3 seconds.
	LateInteraction = "late"
)

// connectWait bounds how long Dispatch waits for the bot to connect: a
// hang, not a slow machine.
const connectWait = 30 * time.Second

// Server is the fake Discord. Its methods are safe for concurrent use.
type Server struct {
	t   testing.TB
	srv *httptest.Server

	mu        sync.Mutex
	seq       int       // guarded by mu, like every field below: ids and gateway sequence numbers handed out
	posts     []Message // messages posted
	edits     []Message // messages edited
	reactions []string  // "+👀 c/m" or "-👀 c/m"
	threads   []Thread
	responses []string // interaction responses: "id type=N flags=F"
	answers   []string // interaction answers: given at once (type 4) or edited in
	commands  []string // command overwrites: "global" or "guild G", then the names
	channels  map[string]Channel
	history   map[string][]map[string]any
	files     map[string]string // attachment content by name
	intents   []int
	limited   int  // POST messages answered with 429 before the next succeeds
	refuse    bool // close the gateway with 4014 after identify
	archived  map[string]bool
	requests  []string
	lookups   int             // GET /channels/{c}
	conn      *websocket.Conn // the bot's gateway connection, the latest one
	connected chan struct{}   // closed once the bot is connected

	connWrite sync.Mutex // serialises writes to conn
}

// Message is a message the bot posted or edited.
type Message struct {
	Channel, ID, Content string
	// Parse is allowed_mentions.parse; nil when absent.
	Parse []string
	// HasAllowed reports whether allowed_mentions was sent.
	HasAllowed bool
	// Files are the attachments sent, their content by name.
	Files map[string]string
}

// Thread is a thread the bot started from a message.
type Thread struct {
	Channel, Message, Name string
	Type                   int // Discord's channel type asked for
}

// Channel is a channel the fake knows, as GET /channels/{id} returns it.
type Channel struct {
	ID       string `json:"id"`
	Type     int    `json:"type"` // 0 a guild text channel, 11 a public thread
	GuildID  string `json:"guild_id,omitempty"`
	ParentID string `json:"parent_id,omitempty"`
	Name     string `json:"name,omitempty"`
}

// New starts a fake Discord, closed by t.Cleanup. A gateway client that
// does not identify first fails t.
func New(t testing.TB) *Server {
	t.Helper()
	f := &Server{t: t, channels: map[string]Channel{
		Text: {ID: Text, Type: 0, GuildID: Guild, Name: "general"},
	}, history: map[string][]map[string]any{}, files: map[string]string{}, archived: map[string]bool{},
		connected: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/gateway", func(w http.ResponseWriter, r *http.Request) {
		reply(w, map[string]any{"url": "ws://" + r.Host + "/gw"})
	})
	mux.HandleFunc("GET /gw/", f.gateway)
	mux.HandleFunc("GET /api/channels/{c}", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		ch, ok := f.channels[r.PathValue("c")]
		f.lookups++
		f.mu.Unlock()
		if !ok {
			apiError(w, http.StatusNotFound, 10003, "Unknown Channel")
			return
		}
		reply(w, ch)
	})
	mux.HandleFunc("PATCH /api/channels/{c}", func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Archived *bool `json:"archived"`
		}
		json.NewDecoder(r.Body).Decode(&body)
		f.mu.Lock()
		defer f.mu.Unlock()
		f.requests = append(f.requests, "edit channel "+r.PathValue("c"))
		if body.Archived != nil && !*body.Archived {
			delete(f.archived, r.PathValue("c"))
		}
		reply(w, map[string]any{"id": r.PathValue("c"), "type": 11})
	})
	mux.HandleFunc("GET /api/channels/{c}/messages", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.requests = append(f.requests, "history "+r.PathValue("c"))
		reply(w, f.history[r.PathValue("c")])
	})
	mux.HandleFunc("POST /api/channels/{c}/messages", f.postMessage)
	mux.HandleFunc("PATCH /api/channels/{c}/messages/{m}", func(w http.ResponseWriter, r *http.Request) {
		s := decodeMessage(r)
		s.Channel, s.ID = r.PathValue("c"), r.PathValue("m")
		f.mu.Lock()
		f.edits = append(f.edits, s)
		f.mu.Unlock()
		reply(w, map[string]any{"id": s.ID, "channel_id": s.Channel, "content": s.Content})
	})
	react := func(sign string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			f.mu.Lock()
			f.reactions = append(f.reactions, sign+r.PathValue("e")+" "+r.PathValue("c")+"/"+r.PathValue("m"))
			f.mu.Unlock()
			w.WriteHeader(http.StatusNoContent)
		}
	}
	mux.HandleFunc("PUT /api/channels/{c}/messages/{m}/reactions/{e}/@me", react("+"))
	mux.HandleFunc("DELETE /api/channels/{c}/messages/{m}/reactions/{e}/@me", react("-"))
	mux.HandleFunc("POST /api/channels/{c}/messages/{m}/threads", func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Name string `json:"name"`
			Type int    `json:"type"`
		}
		json.NewDecoder(r.Body).Decode(&body)
		c, m := r.PathValue("c"), r.PathValue("m")
		if c == NoThreads {
			apiError(w, http.StatusForbidden, 50013, "Missing Permissions")
			return
		}
		th := Channel{ID: m, Type: 11, GuildID: Guild, ParentID: c, Name: body.Name}
		f.mu.Lock()
		f.threads = append(f.threads, Thread{Channel: c, Message: m, Name: body.Name, Type: body.Type})
		f.channels[m] = th
		f.mu.Unlock()
		reply(w, th)
	})
	mux.HandleFunc("POST /api/interactions/{id}/{token}/callback", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("id") == LateInteraction {
			apiError(w, http.StatusNotFound, 10062, "Unknown interaction")
			return
		}
		var body struct {
			Type int `json:"type"`
			Data struct {
				Flags   int    `json:"flags"`
				Content string `json:"content"`
			} `json:"data"`
		}
		json.NewDecoder(r.Body).Decode(&body)
		f.mu.Lock()
		f.responses = append(f.responses, fmt.Sprintf("%s type=%d flags=%d", r.PathValue("id"), body.Type, body.Data.Flags))
		if body.Type == 4 { // answered at once
			f.answers = append(f.answers, body.Data.Content)
		}
		f.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("PATCH /api/webhooks/{app}/{token}/messages/@original", func(w http.ResponseWriter, r *http.Request) {
		s := decodeMessage(r)
		f.mu.Lock()
		f.answers = append(f.answers, s.Content)
		f.mu.Unlock()
		reply(w, map[string]any{"id": "answer", "content": s.Content})
	})
	overwrite := func(w http.ResponseWriter, r *http.Request) {
		var cmds []struct {
			Name    string `json:"name"`
			Options []struct {
				Name string `json:"name"`
			} `json:"options"`
		}
		json.NewDecoder(r.Body).Decode(&cmds)
		desc := "global"
		if g := r.PathValue("g"); g != "" {
			desc = "guild " + g
		}
		for _, c := range cmds {
			desc += " /" + c.Name
			for _, o := range c.Options {
				desc += " " + o.Name
			}
		}
		f.mu.Lock()
		f.commands = append(f.commands, desc)
		f.mu.Unlock()
		reply(w, []any{})
	}
	mux.HandleFunc("PUT /api/applications/{app}/commands", overwrite)
	mux.HandleFunc("PUT /api/applications/{app}/guilds/{g}/commands", overwrite)
	mux.HandleFunc("GET /files/{name}", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		body, ok := f.files[r.PathValue("name")]
		f.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		io.WriteString(w, body)
	})
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

// APIURL is the REST base the adapter is configured with
// (discord.Config.APIURL).
func (f *Server) APIURL() string { return f.srv.URL + "/api/" }

// AddFile serves content as an attachment named name and returns its URL,
// for a message's attachments.
func (f *Server) AddFile(name, content string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.files[name] = content
	return f.srv.URL + "/files/" + name
}

// AddChannel makes c known to GET /channels/{id}, replacing a channel of
// the same id. The gateway's GUILD_CREATE lists only Text.
func (f *Server) AddChannel(c Channel) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.channels[c.ID] = c
}

// SetHistory sets the earlier messages of channel that GET
// /channels/{id}/messages lists: Discord's message objects, newest first,
// as Discord lists them.
func (f *Server) SetHistory(channel string, msgs []map[string]any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.history[channel] = msgs
}

// Archive marks thread archived: a post there is refused with 50083
// (Thread is archived) until the thread is edited to archived=false.
func (f *Server) Archive(thread string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.archived[thread] = true
}

// RateLimit answers the next n message posts with 429 and Discord's
// rate-limit headers (Retry-After 3, retry_after 2.5 in the body).
func (f *Server) RateLimit(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.limited = n
}

// RefuseIntents makes the gateway close connections with 4014 (Disallowed
// intent(s)) after identify, as Discord does when the Message Content
// intent is not enabled for the bot.
func (f *Server) RefuseIntents() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.refuse = true
}

func (f *Server) nextID() string {
	f.seq++
	return strconv.Itoa(5000 + f.seq)
}

func (f *Server) postMessage(w http.ResponseWriter, r *http.Request) {
	s := decodeMessage(r)
	s.Channel = r.PathValue("c")
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.limited > 0 {
		f.limited--
		w.Header().Set("X-RateLimit-Limit", "5")
		w.Header().Set("X-RateLimit-Remaining", "0")
		w.Header().Set("X-RateLimit-Reset-After", "0.001")
		w.Header().Set("X-RateLimit-Bucket", "abc")
		w.Header().Set("Retry-After", "3")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		io.WriteString(w, `{"message": "You are being rate limited.", "retry_after": 2.5, "global": false}`)
		return
	}
	if f.archived[s.Channel] {
		apiError(w, http.StatusBadRequest, 50083, "Thread is archived")
		return
	}
	switch s.Channel {
	case Forbidden:
		apiError(w, http.StatusForbidden, 50013, "Missing Permissions")
		return
	case Unknown:
		apiError(w, http.StatusNotFound, 10003, "Unknown Channel")
		return
	}
	s.ID = f.nextID()
	f.posts = append(f.posts, s)
	reply(w, map[string]any{"id": s.ID, "channel_id": s.Channel, "content": s.Content})
}

// decodeMessage reads a message body: JSON, or multipart with payload_json
// and files.
func decodeMessage(r *http.Request) Message {
	var body struct {
		Content         string `json:"content"`
		AllowedMentions *struct {
			Parse []string `json:"parse"`
		} `json:"allowed_mentions"`
	}
	s := Message{Files: map[string]string{}}
	mt, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if strings.HasPrefix(mt, "multipart/") {
		mr := multipart.NewReader(r.Body, params["boundary"])
		for {
			p, err := mr.NextPart()
			if err != nil {
				break
			}
			b, _ := io.ReadAll(p)
			if p.FormName() == "payload_json" {
				json.Unmarshal(b, &body)
			} else {
				s.Files[p.FileName()] = string(b)
			}
		}
	} else {
		json.NewDecoder(r.Body).Decode(&body)
	}
	s.Content = body.Content
	if body.AllowedMentions != nil {
		s.HasAllowed, s.Parse = true, body.AllowedMentions.Parse
	}
	return s
}

func reply(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

func apiError(w http.ResponseWriter, status, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"code": code, "message": msg})
}

var upgrader = websocket.Upgrader{}

// gateway speaks the gateway's handshake: hello, identify, READY,
// GUILD_CREATE; then it acknowledges heartbeats while the test dispatches
// events.
func (f *Server) gateway(w http.ResponseWriter, r *http.Request) {
	c, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	defer c.Close()
	f.write(c, map[string]any{"op": 10, "d": map[string]any{"heartbeat_interval": 45000}})
	var id struct {
		Op int `json:"op"`
		D  struct {
			Token   string `json:"token"`
			Intents int    `json:"intents"`
		} `json:"d"`
	}
	if err := c.ReadJSON(&id); err != nil || id.Op != 2 {
		f.t.Errorf("discordfake: gateway: want identify (op 2), got op %d, %v", id.Op, err)
		return
	}
	f.mu.Lock()
	f.intents = append(f.intents, id.D.Intents)
	refuse := f.refuse
	f.mu.Unlock()
	if refuse {
		c.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(4014, "Disallowed intent(s)."))
		return
	}
	f.write(c, map[string]any{"op": 0, "s": 1, "t": "READY", "d": map[string]any{
		"v": 10, "session_id": "sess", "user": map[string]any{"id": Bot, "username": "baton", "bot": true},
		"application": map[string]any{"id": App}, "guilds": []any{map[string]any{"id": Guild, "unavailable": true}},
	}})
	f.mu.Lock()
	text := f.channels[Text]
	first := f.conn == nil
	f.conn = c
	f.mu.Unlock()
	f.write(c, map[string]any{"op": 0, "s": 2, "t": "GUILD_CREATE", "d": map[string]any{
		"id": Guild, "name": "guild", "channels": []any{text}, "threads": []any{}, "members": []any{}, "roles": []any{},
	}})
	if first {
		close(f.connected)
	}
	for {
		var in struct {
			Op int `json:"op"`
		}
		if err := c.ReadJSON(&in); err != nil {
			return
		}
		if in.Op == 1 {
			f.write(c, map[string]any{"op": 11})
		}
	}
}

func (f *Server) write(c *websocket.Conn, v any) {
	f.connWrite.Lock()
	defer f.connWrite.Unlock()
	c.WriteJSON(v)
}

// Dispatch sends a gateway event (op 0) of type typ with data d to the
// connected bot, waiting for the bot to connect first (failing the test
// when it does not within 30 seconds). Events of one test arrive in the
// order dispatched.
func (f *Server) Dispatch(typ string, d any) {
	f.t.Helper()
	select {
	case <-f.connected:
	case <-time.After(connectWait):
		f.t.Fatalf("discordfake: the bot did not connect to the gateway within %s", connectWait)
	}
	f.mu.Lock()
	c := f.conn
	f.seq++
	seq := f.seq
	f.mu.Unlock()
	f.write(c, map[string]any{"op": 0, "s": seq, "t": typ, "d": d})
}

// Posts returns the messages the bot posted, in order.
func (f *Server) Posts() []Message {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.posts)
}

// Edits returns the messages the bot edited, in order.
func (f *Server) Edits() []Message {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.edits)
}

// Reactions returns the bot's reactions added ("+👀 channel/message") and
// removed ("-👀 channel/message"), in order.
func (f *Server) Reactions() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.reactions)
}

// Threads returns the threads the bot started, in order.
func (f *Server) Threads() []Thread {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.threads)
}

// Responses returns the bot's interaction responses as "id type=N
// flags=F", in order.
func (f *Server) Responses() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.responses)
}

// Answers returns the texts the bot answered interactions with, given at
// once (response type 4) or edited into a deferred response, in order.
func (f *Server) Answers() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.answers)
}

// Commands returns the bot's application command overwrites, each as
// "global" or "guild G" followed by " /name option…" per command.
func (f *Server) Commands() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.commands)
}

// Intents returns the intents of every identify the gateway received.
func (f *Server) Intents() []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.intents)
}

// Requests returns the bot's channel edits ("edit channel C") and history
// reads ("history C"), in order.
func (f *Server) Requests() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.requests)
}

// Lookups counts the bot's channel lookups (GET /channels/{id}).
func (f *Server) Lookups() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lookups
}
