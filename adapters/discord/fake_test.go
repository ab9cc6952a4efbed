package discord

import (
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// Ids of the fake Discord's fixed things.
const (
	fakeBot   = "900"
	fakeApp   = "901"
	fakeGuild = "100"
	fakeText  = "200" // a text channel
	fakeDM    = "300" // a DM channel
)

// fakeDiscord is Discord's REST API and gateway, as far as Baton uses them:
// it records what the bot does and lets a test dispatch gateway events.
type fakeDiscord struct {
	t   testing.TB
	srv *httptest.Server

	mu        sync.Mutex
	seq       int
	posts     []sent // guarded by mu, like every field below
	edits     []sent
	reactions []string // "+👀 c/m" or "-👀 c/m"
	threads   []threadStart
	responses []string // interaction responses: "id type=N flags=F"
	answers   []string // interaction answers: given at once (type 4) or edited in
	commands  []string // command overwrites: "global" or the guild, then the names
	channels  map[string]map[string]any
	history   map[string][]map[string]any
	files     map[string]string // attachment content by name
	intents   []int
	limited   int  // POST messages answered with 429 before the next succeeds
	refuse    bool // close the gateway with 4014 after identify
	archived  map[string]bool
	requests  []string
	lookups   int // GET /channels/{c}
	conn      *websocket.Conn
	connWrite sync.Mutex
}

// sent is a message the bot posted or edited.
type sent struct {
	Channel, ID, Content string
	Parse                []string // allowed_mentions.parse; nil when absent
	HasAllowed           bool
	Files                map[string]string
}

type threadStart struct {
	Channel, Message, Name string
	Type                   int
}

func newFake(t testing.TB) *fakeDiscord {
	t.Helper()
	f := &fakeDiscord{t: t, channels: map[string]map[string]any{
		fakeText: {"id": fakeText, "type": 0, "guild_id": fakeGuild, "name": "general"},
	}, history: map[string][]map[string]any{}, files: map[string]string{}, archived: map[string]bool{}}
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
		s := decodeSent(t, r)
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
		if c == "210" {
			apiError(w, http.StatusForbidden, 50013, "Missing Permissions")
			return
		}
		th := map[string]any{"id": m, "type": 11, "guild_id": fakeGuild, "parent_id": c, "name": body.Name}
		f.mu.Lock()
		f.threads = append(f.threads, threadStart{Channel: c, Message: m, Name: body.Name, Type: body.Type})
		f.channels[m] = th
		f.mu.Unlock()
		reply(w, th)
	})
	mux.HandleFunc("POST /api/interactions/{id}/{token}/callback", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("id") == "late" {
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
		s := decodeSent(t, r)
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

// apiURL is the REST base the adapter is configured with.
func (f *fakeDiscord) apiURL() string { return f.srv.URL + "/api/" }

func (f *fakeDiscord) nextID() string {
	f.seq++
	return strconv.Itoa(5000 + f.seq)
}

func (f *fakeDiscord) postMessage(w http.ResponseWriter, r *http.Request) {
	s := decodeSent(f.t, r)
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
	case "403":
		apiError(w, http.StatusForbidden, 50013, "Missing Permissions")
		return
	case "404":
		apiError(w, http.StatusNotFound, 10003, "Unknown Channel")
		return
	}
	s.ID = f.nextID()
	f.posts = append(f.posts, s)
	reply(w, map[string]any{"id": s.ID, "channel_id": s.Channel, "content": s.Content})
}

// decodeSent reads a message body: JSON, or multipart with payload_json
// and files.
func decodeSent(t testing.TB, r *http.Request) sent {
	var body struct {
		Content         string `json:"content"`
		AllowedMentions *struct {
			Parse []string `json:"parse"`
		} `json:"allowed_mentions"`
	}
	s := sent{Files: map[string]string{}}
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
func (f *fakeDiscord) gateway(w http.ResponseWriter, r *http.Request) {
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
		f.t.Errorf("gateway: want identify (op 2), got op %d, %v", id.Op, err)
		return
	}
	f.mu.Lock()
	f.intents = append(f.intents, id.D.Intents)
	f.mu.Unlock()
	f.mu.Lock()
	refuse := f.refuse
	f.mu.Unlock()
	if refuse {
		c.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(4014, "Disallowed intent(s)."))
		return
	}
	f.write(c, map[string]any{"op": 0, "s": 1, "t": "READY", "d": map[string]any{
		"v": 10, "session_id": "sess", "user": map[string]any{"id": fakeBot, "username": "baton", "bot": true},
		"application": map[string]any{"id": fakeApp}, "guilds": []any{map[string]any{"id": fakeGuild, "unavailable": true}},
	}})
	f.mu.Lock()
	text := f.channels[fakeText]
	f.conn = c
	f.mu.Unlock()
	f.write(c, map[string]any{"op": 0, "s": 2, "t": "GUILD_CREATE", "d": map[string]any{
		"id": fakeGuild, "name": "guild", "channels": []any{text}, "threads": []any{}, "members": []any{}, "roles": []any{},
	}})
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

func (f *fakeDiscord) write(c *websocket.Conn, v any) {
	f.connWrite.Lock()
	defer f.connWrite.Unlock()
	c.WriteJSON(v)
}

// dispatch sends a gateway event (op 0) to the connected bot.
func (f *fakeDiscord) dispatch(typ string, d any) {
	f.t.Helper()
	waitFor(f.t, "the gateway connection", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.conn != nil
	})
	f.mu.Lock()
	c := f.conn
	f.seq++
	seq := f.seq
	f.mu.Unlock()
	f.write(c, map[string]any{"op": 0, "s": seq, "t": typ, "d": d})
}

// snapshot returns copies of what the bot did.
func (f *fakeDiscord) snapshot() (posts, edits []sent, reactions []string, threads []threadStart) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]sent(nil), f.posts...), append([]sent(nil), f.edits...), append([]string(nil), f.reactions...), append([]threadStart(nil), f.threads...)
}

// waitFor polls cond until it holds, failing the test after a generous
// deadline (a hang, not a slow machine).
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
