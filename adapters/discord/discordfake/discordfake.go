// Package discordfake is a fake of Discord's REST API and gateway, as far as
// Baton's Discord adapter uses them, for tests. A test starts one with New,
// points the adapter's Config.APIURL at APIURL(), dispatches gateway events
// with Dispatch (or Click, for a button), and afterwards asserts on what
// the bot did (Posts, Edits, Reactions, Threads, Answers, Followups, …):
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
// acknowledges heartbeats; it does not resume, it sends every event to
// each of the bot's open connections as Discord does (Open and Connects
// count them), and REST checks the token
// only once RequireToken named it. GET users/@me and applications/@me
// describe the bot and its application (flags: the Message Content intent
// on, unless RefuseIntents), and GET applications/App/guilds/Guild/commands
// answers (another guild: 403 Missing Access). Some
// ids answer with Discord's errors: see NoThreads, Forbidden, Unknown and
// LateInteraction. Events, and the earlier messages of a channel, are
// Discord's JSON objects as maps; what the bot sent is recorded typed,
// buttons (message components) and nonces included. A post with an
// enforced nonce (enforce_nonce) the bot used in the channel before is
// answered with that earlier message, and nothing is posted.
//
// Interactions are answered as Discord does: one response each (a second
// is refused with 40060), a deferred update (type 6) only for a button
// click sent with Click, and follow-ups only once the interaction was
// answered.
//
// It imports nothing of Baton, so tests of the adapter and whole-system
// tests share it.
package discordfake

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
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
	followups []Followup
	clicks    map[string]bool   // interaction ids of the clicks sent with Click
	acked     map[string]bool   // interaction ids answered
	tokens    map[string]string // interaction id by token, for follow-ups
	commands  []string          // command overwrites: "global" or "guild G", then the names
	channels  map[string]Channel
	history   map[string][]map[string]any
	files     map[string]string // attachment content by name
	intents   []int
	limited   int    // POST messages answered with 429 before the next succeeds
	refuse    bool   // close the gateway with 4014 after identify; GET applications/@me shows no Message Content flag
	token     string // the bot token REST requests must carry (RequireToken); "": any
	archived  map[string]bool
	requests  []string
	lookups   int                      // GET /channels/{c}
	conns     map[*websocket.Conn]bool // the bot's gateway connections open now, past READY
	connects  int                      // gateway connections that got READY
	maxOpen   int                      // the most connections open at once

	connWrite sync.Mutex // serialises writes to the connections
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
	// Rows are the action rows sent (components); HasComponents reports
	// whether components were sent at all (not absent or null): an edit
	// with HasComponents and no Rows removes the message's buttons.
	Rows          []Row
	HasComponents bool
	// Nonce is the nonce a post carried; EnforceNonce whether it asked
	// Discord to enforce it.
	Nonce        string
	EnforceNonce bool
	// Embeds are the embeds sent (none: nil); At is when the fake got a
	// message with embeds (zero for the others).
	Embeds []Embed
	At     time.Time
}

// Embed is an embed of a message.
type Embed struct {
	Title, Description string
}

// Buttons returns the buttons of all of m's rows, in order.
func (m Message) Buttons() []Button {
	var out []Button
	for _, r := range m.Rows {
		out = append(out, r.Buttons...)
	}
	return out
}

// Row is an action row (component type 1) of a message.
type Row struct {
	Buttons []Button
}

// Button is a button (component type 2) of a message.
type Button struct {
	CustomID, Label string
	Style           int // 1 primary, 2 secondary, 3 success, 4 danger, 5 link
}

// Followup is a follow-up message the bot sent for an interaction.
type Followup struct {
	Interaction string // the interaction's id
	Content     string
	Flags       int // 64: ephemeral, shown to the clicker alone
	// Parse is allowed_mentions.parse; HasAllowed whether it was sent.
	Parse      []string
	HasAllowed bool
}

// Click is a press on one of the bot's buttons, as Click sends it.
type Click struct {
	// ID is the interaction's id; empty: one is made up.
	ID string
	// CustomID is the button's custom_id.
	CustomID string
	// User and Name are the clicker's user id and username; Roles their
	// roles in Guild.
	User, Name string
	Roles      []string
	// Channel is where the message is (a thread, a text or a DM channel);
	// Guild is empty in a DM.
	Channel, Guild string
	// Message is the id of the message that carries the button.
	Message string
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
		clicks: map[string]bool{}, acked: map[string]bool{}, tokens: map[string]string{},
		conns: map[*websocket.Conn]bool{}}
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
		s, _ := decodeMessage(r)
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
		id := r.PathValue("id")
		if id == LateInteraction {
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
		defer f.mu.Unlock()
		switch {
		case f.acked[id]:
			apiError(w, http.StatusBadRequest, 40060, "Interaction has already been acknowledged.")
			return
		case (body.Type == 6 || body.Type == 7) && !f.clicks[id]:
			// Updates of the message are for component interactions.
			apiError(w, http.StatusBadRequest, 50035, "Invalid Form Body: interaction response type not valid for this interaction")
			return
		}
		f.acked[id] = true
		f.tokens[r.PathValue("token")] = id
		f.responses = append(f.responses, fmt.Sprintf("%s type=%d flags=%d", id, body.Type, body.Data.Flags))
		if body.Type == 4 { // answered at once
			f.answers = append(f.answers, body.Data.Content)
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /api/webhooks/{app}/{token}", func(w http.ResponseWriter, r *http.Request) {
		s, raw := decodeMessage(r)
		var flags struct {
			Flags int `json:"flags"`
		}
		json.Unmarshal(raw, &flags)
		f.mu.Lock()
		defer f.mu.Unlock()
		id, ok := f.tokens[r.PathValue("token")]
		if !ok || r.PathValue("app") != App {
			// Discord knows an interaction's webhook once it was answered.
			apiError(w, http.StatusNotFound, 10015, "Unknown Webhook")
			return
		}
		f.followups = append(f.followups, Followup{Interaction: id, Content: s.Content, Flags: flags.Flags, Parse: s.Parse, HasAllowed: s.HasAllowed})
		reply(w, map[string]any{"id": f.nextID(), "channel_id": "", "content": s.Content, "flags": flags.Flags})
	})
	mux.HandleFunc("PATCH /api/webhooks/{app}/{token}/messages/@original", func(w http.ResponseWriter, r *http.Request) {
		s, _ := decodeMessage(r)
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
	mux.HandleFunc("GET /api/users/@me", func(w http.ResponseWriter, r *http.Request) {
		reply(w, map[string]any{"id": Bot, "username": "baton", "bot": true})
	})
	mux.HandleFunc("GET /api/applications/@me", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		refused := f.refuse
		f.mu.Unlock()
		flags := gatewayMessageContentLimited
		if refused {
			flags = 0
		}
		reply(w, map[string]any{"id": App, "name": "Baton", "flags": flags, "bot": map[string]any{"id": Bot}})
	})
	mux.HandleFunc("GET /api/applications/{app}/guilds/{g}/commands", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("app") != App || r.PathValue("g") != Guild {
			// What Discord answers for a guild the bot was not invited to.
			apiError(w, http.StatusForbidden, 50001, "Missing Access")
			return
		}
		reply(w, []any{})
	})
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
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		token := f.token
		f.mu.Unlock()
		if token != "" && strings.HasPrefix(r.URL.Path, "/api/") && r.Header.Get("Authorization") != "Bot "+token {
			apiError(w, http.StatusUnauthorized, 0, "401: Unauthorized")
			return
		}
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

// gatewayMessageContentLimited is the application flag Discord sets when
// the Message Content intent is switched on for a bot in fewer than 100
// servers.
const gatewayMessageContentLimited = 1 << 19

// RequireToken makes every REST request without "Authorization: Bot
// token" answer 401 Unauthorized, as Discord answers a wrong token; until
// then any token passes.
func (f *Server) RequireToken(token string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.token = token
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
// intent is not enabled for the bot; GET applications/@me then shows the
// application without the intent's flag.
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
	s, _ := decodeMessage(r)
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
	if s.EnforceNonce && s.Nonce != "" {
		// As Discord: the bot's earlier message in the channel with this
		// nonce is the answer, and nothing is posted (Discord remembers a
		// nonce for a few minutes, the fake for ever).
		for _, p := range f.posts {
			if p.Channel == s.Channel && p.Nonce == s.Nonce {
				reply(w, map[string]any{"id": p.ID, "channel_id": p.Channel, "content": p.Content, "nonce": p.Nonce})
				return
			}
		}
	}
	s.ID = f.nextID()
	f.posts = append(f.posts, s)
	reply(w, map[string]any{"id": s.ID, "channel_id": s.Channel, "content": s.Content})
}

// decodeMessage reads a message body: JSON, or multipart with payload_json
// and files. It returns the JSON too.
func decodeMessage(r *http.Request) (Message, []byte) {
	var body struct {
		Content         string `json:"content"`
		AllowedMentions *struct {
			Parse []string `json:"parse"`
		} `json:"allowed_mentions"`
		Components   json.RawMessage `json:"components"`
		Nonce        string          `json:"nonce"`
		EnforceNonce bool            `json:"enforce_nonce"`
		Embeds       []struct {
			Title       string `json:"title"`
			Description string `json:"description"`
		} `json:"embeds"`
	}
	var raw []byte
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
				raw = b
				json.Unmarshal(b, &body)
			} else {
				s.Files[p.FileName()] = string(b)
			}
		}
	} else {
		raw, _ = io.ReadAll(r.Body)
		json.Unmarshal(raw, &body)
	}
	s.Content, s.Nonce, s.EnforceNonce = body.Content, body.Nonce, body.EnforceNonce
	for _, e := range body.Embeds {
		s.Embeds = append(s.Embeds, Embed{Title: e.Title, Description: e.Description})
		s.At = time.Now()
	}
	if body.AllowedMentions != nil {
		s.HasAllowed, s.Parse = true, body.AllowedMentions.Parse
	}
	if len(body.Components) > 0 && string(body.Components) != "null" {
		s.HasComponents = true
		var rows []struct {
			Type       int `json:"type"`
			Components []struct {
				Type     int    `json:"type"`
				CustomID string `json:"custom_id"`
				Label    string `json:"label"`
				Style    int    `json:"style"`
			} `json:"components"`
		}
		json.Unmarshal(body.Components, &rows)
		for _, row := range rows {
			var out Row
			for _, c := range row.Components {
				if c.Type == 2 {
					out.Buttons = append(out.Buttons, Button{CustomID: c.CustomID, Label: c.Label, Style: c.Style})
				}
			}
			s.Rows = append(s.Rows, out)
		}
	}
	return s, raw
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
	f.mu.Unlock()
	f.write(c, map[string]any{"op": 0, "s": 2, "t": "GUILD_CREATE", "d": map[string]any{
		"id": Guild, "name": "guild", "channels": []any{text}, "threads": []any{}, "members": []any{}, "roles": []any{},
	}})
	f.mu.Lock()
	f.conns[c] = true
	f.connects++
	f.maxOpen = max(f.maxOpen, len(f.conns))
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		delete(f.conns, c)
	}()
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

// Dispatch sends a gateway event (op 0) of type typ with data d to every
// gateway connection of the bot open now, as Discord sends each of a
// bot's sessions every event, waiting for one to be open first (failing
// the test when none is within 30 seconds). Events of one test arrive in
// the order dispatched.
func (f *Server) Dispatch(typ string, d any) {
	f.t.Helper()
	deadline := time.Now().Add(connectWait)
	for f.Open() == 0 {
		if time.Now().After(deadline) {
			f.t.Fatalf("discordfake: the bot did not connect to the gateway within %s", connectWait)
		}
		time.Sleep(5 * time.Millisecond)
	}
	f.mu.Lock()
	conns := slices.Collect(maps.Keys(f.conns))
	f.seq++
	seq := f.seq
	f.mu.Unlock()
	for _, c := range conns {
		f.write(c, map[string]any{"op": 0, "s": seq, "t": typ, "d": d})
	}
}

// Open returns how many gateway connections of the bot are open now
// (past READY and not yet closed).
func (f *Server) Open() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.conns)
}

// Connects returns how many gateway connections of the bot got READY, and
// the most of them that were ever open at once.
func (f *Server) Connects() (total, maxOpen int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.connects, f.maxOpen
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

// Click sends a button press (INTERACTION_CREATE of type 3, message
// component) to the connected bot, as Dispatch does, and returns the
// interaction's id. In a guild the clicker comes as a member with Roles;
// in a DM as a user. The interaction's token is "tok-" and its id.
func (f *Server) Click(c Click) string {
	f.t.Helper()
	f.mu.Lock()
	if c.ID == "" {
		c.ID = "click-" + f.nextID()
	}
	f.clicks[c.ID] = true
	content := ""
	if m, ok := f.current(c.Message); ok {
		content = m.Content
	}
	f.mu.Unlock()
	name := c.Name
	if name == "" {
		name = "user" + c.User
	}
	user := map[string]any{"id": c.User, "username": name}
	d := map[string]any{
		"id": c.ID, "application_id": App, "type": 3, "token": "tok-" + c.ID, "version": 1, "channel_id": c.Channel,
		"message": map[string]any{"id": c.Message, "channel_id": c.Channel, "type": 0, "content": content,
			"author": map[string]any{"id": Bot, "username": "baton", "bot": true}},
		"data": map[string]any{"custom_id": c.CustomID, "component_type": 2},
	}
	if c.Guild != "" {
		roles := c.Roles
		if roles == nil {
			roles = []string{}
		}
		d["guild_id"] = c.Guild
		d["member"] = map[string]any{"user": user, "roles": roles}
	} else {
		d["user"] = user
	}
	f.Dispatch("INTERACTION_CREATE", d)
	return c.ID
}

// Followups returns the follow-up messages the bot sent for interactions,
// in order.
func (f *Server) Followups() []Followup {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.followups)
}

// Current returns message id as it stands: as posted, with the bot's later
// edits applied (their text, and their components when they sent any);
// false when the bot posted no such message.
func (f *Server) Current(id string) (Message, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.current(id)
}

func (f *Server) current(id string) (Message, bool) {
	i := slices.IndexFunc(f.posts, func(m Message) bool { return m.ID == id })
	if i < 0 {
		return Message{}, false
	}
	m := f.posts[i]
	for _, e := range f.edits {
		if e.ID != id {
			continue
		}
		if e.Content != "" {
			m.Content = e.Content
		}
		if e.HasComponents {
			m.Rows, m.HasComponents = e.Rows, true
		}
	}
	return m, true
}
