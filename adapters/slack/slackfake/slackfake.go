// Package slackfake is Slack as Baton's tests see it: the Web API (on
// slack-go's slacktest server, with the routes slacktest lacks) recording
// every call Baton makes (the blocks of a message too, so that its buttons
// can be found), the requests Slack sends an HTTP-mode app (events, clicks
// on buttons: BlockActions, Interaction), signed as Slack signs them, and
// an inbox that fails as a full disk does.
//
// A test starts a Server, points the adapter at it (slack.Config.APIURL =
// URL(), BotToken = BotToken), sends it events built with MentionEvent,
// MessageEvent or Callback and signed with Sign, and asserts on Recorded:
//
//	f := slackfake.NewServer(t)
//	… an adapter with APIURL f.URL() …
//	r := slackfake.Sign(t, base, "/slack/events", slackfake.MentionEvent("Ev1", "U1", "<@UBATON> hi", ts, ""), time.Now(), "application/json")
//	… send r …
//	posts := f.Recorded("chat.postMessage")
//
// The bot is BotUser (BotID) of workspace Team, as auth.test answers. The
// adapter's own tests and the whole-system tests (bot/e2e) share this one
// fake; it never imports the queue.
package slackfake

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/baton-bot/baton/core"
	"github.com/slack-go/slack/slacktest"
)

// Who the bot is, and the secrets the fake expects.
const (
	BotUser = "UBATON" // the bot's user id (auth.test's user_id)
	BotID   = "BBATON" // the bot's bot id (auth.test's bot_id)
	Team    = "T1"     // the workspace (auth.test's team_id, every event's team_id)
	// BotToken is the token file downloads must carry (Authorization:
	// Bearer); the other methods take any token.
	BotToken = "xoxb-test"
	// SigningSecret is the secret Sign signs requests with.
	SigningSecret = "8f742231b10e8888abcd99yyyzzz85a5"
)

// Call is one Web API call the fake received.
type Call struct {
	Method    string
	Channel   string
	TS        string // the message edited or reacted to
	ThreadTS  string
	Text      string
	Name      string // reaction, file name or file id
	Parse     string
	LinkNames string
	User      string // chat.postEphemeral; chat.startStream's recipient_user_id
	// Posted is the ts a chat.postMessage was answered with: the new
	// message's, which later edits (TS) and clicks on it name.
	Posted string
	// Blocks is the Block Kit JSON a chat.postMessage or chat.update
	// carried ("" when it sent none); Buttons and Section read it.
	Blocks string
	// Metadata is the message metadata JSON a chat.postMessage carried
	// ("" when it sent none); conversations.replies and
	// conversations.history answer it with include_all_metadata.
	Metadata string
	// Chunks is the chunks JSON a streaming call (chat.startStream,
	// chat.appendStream, chat.stopStream) carried; At is when the fake
	// received it (zero for the other methods).
	Chunks string
	At     time.Time
}

// StreamChunk is one chunk of a streaming call.
type StreamChunk struct {
	Type   string `json:"type"`
	ID     string `json:"id"`
	Title  string `json:"title"`
	Status string `json:"status"`
	Text   string `json:"text"`
}

// StreamChunks returns the chunks of a streaming call, in order.
func (c Call) StreamChunks() []StreamChunk {
	var out []StreamChunk
	_ = json.Unmarshal([]byte(c.Chunks), &out)
	return out
}

// Button is a button of a recorded message's blocks.
type Button struct {
	ActionID string
	Value    string
	Label    string
	Style    string // "primary", "danger" or ""
}

// Buttons returns the buttons of the call's actions blocks, in order:
// none when it sent no blocks, or blocks without buttons (an edit that
// removed them).
func (c Call) Buttons() []Button {
	var blocks []struct {
		Type     string `json:"type"`
		Elements []struct {
			Type     string `json:"type"`
			ActionID string `json:"action_id"`
			Value    string `json:"value"`
			Style    string `json:"style"`
			Text     struct {
				Text string `json:"text"`
			} `json:"text"`
		} `json:"elements"`
	}
	_ = json.Unmarshal([]byte(c.Blocks), &blocks)
	var out []Button
	for _, b := range blocks {
		if b.Type != "actions" {
			continue
		}
		for _, e := range b.Elements {
			if e.Type == "button" {
				out = append(out, Button{ActionID: e.ActionID, Value: e.Value, Label: e.Text.Text, Style: e.Style})
			}
		}
	}
	return out
}

// Section returns the text of the call's first section block ("" when it
// has none).
func (c Call) Section() string {
	var blocks []struct {
		Type string `json:"type"`
		Text struct {
			Text string `json:"text"`
		} `json:"text"`
	}
	_ = json.Unmarshal([]byte(c.Blocks), &blocks)
	for _, b := range blocks {
		if b.Type == "section" {
			return b.Text.Text
		}
	}
	return ""
}

// Server is the fake Web API. It answers, besides slacktest's routes:
// chat.postMessage, chat.update, chat.postEphemeral, reactions.add and
// reactions.remove (recorded, blocks included, each answered with a fresh
// ts; blocks with a section over Slack's 3,000 characters are answered
// invalid_blocks, as Slack answers them);
// usergroups.users.list (SetMembers); users.info (SetUser); files.info
// (SetFileInfo); auth.test (the bot's identity, and the token's scopes
// once SetScopes named them); apps.connections.open (slacktest's
// websocket, unless a test binds its own); conversations.replies and
// conversations.history (the messages chat.postMessage posted in the
// thread, oldest first, or at the channel's top level, newest first, in
// pages of the limit asked, their metadata with include_all_metadata);
// the external upload (files.getUploadURLExternal, the
// upload URL, files.completeUploadExternal; the content kept for File);
// and DownloadURL's files. Its methods are safe for concurrent use.
type Server struct {
	srv *slacktest.Server

	mu    sync.Mutex
	calls []Call          // guarded by mu
	gone  map[string]bool // guarded by mu: messages deleted (DeleteMessage)
	// retryAfter is the Retry-After of a 429 (RateLimit), in seconds;
	// guarded by mu.
	retryAfter string
	limited    int               // guarded by mu: calls answered 429
	fail       map[string]string // guarded by mu: method → error code to answer
	limit      map[string]int    // guarded by mu: method → 429s to answer first
	seq        int               // guarded by mu: last ts or file id handed out
	files      map[string][]byte // guarded by mu: uploaded content by file id
	// maxText: method → the most characters of text it accepts; longer
	// texts are answered msg_too_long and counted in refused.
	maxText map[string]int // guarded by mu
	refused int            // guarded by mu
	// noBlocks: method → whether it refuses any blocks (RefuseBlocks).
	noBlocks map[string]bool // guarded by mu
	// members: user group id → its members (usergroups.users.list);
	// memberCalls counts the calls.
	members     map[string][]string // guarded by mu
	memberCalls int                 // guarded by mu
	// users: user id → display name (users.info); userCalls counts the
	// calls.
	users     map[string]string // guarded by mu
	userCalls int               // guarded by mu
	// fileInfo: file id → the file object files.info answers.
	fileInfo map[string]map[string]any // guarded by mu
	// scopes: what auth.test reports in X-OAuth-Scopes; nil: no header.
	scopes []string // guarded by mu
}

// NewServer starts a fake Web API, stopped by t.Cleanup. extra binds more
// routes (Socket Mode's, say) on the same server.
func NewServer(t testing.TB, extra ...slacktest.Binder) *Server {
	t.Helper()
	s := &Server{retryAfter: "7", fail: map[string]string{}, limit: map[string]int{}, files: map[string][]byte{}, maxText: map[string]int{}, noBlocks: map[string]bool{},
		members: map[string][]string{}, users: map[string]string{}, fileInfo: map[string]map[string]any{}}
	bind := func(c slacktest.Customize) {
		for _, m := range []string{"chat.postMessage", "chat.update", "chat.postEphemeral", "reactions.add", "reactions.remove",
			"chat.startStream", "chat.appendStream", "chat.stopStream", "assistant.threads.setStatus"} {
			c.Handle("/"+m, s.record(m))
		}
		c.Handle("/usergroups.users.list", func(w http.ResponseWriter, r *http.Request) {
			if s.failed(w, "usergroups.users.list") {
				return
			}
			s.mu.Lock()
			defer s.mu.Unlock()
			s.memberCalls++
			users, ok := s.members[r.FormValue("usergroup")]
			if !ok {
				WriteJSON(w, map[string]any{"ok": false, "error": "no_such_subteam"})
				return
			}
			WriteJSON(w, map[string]any{"ok": true, "users": users})
		})
		c.Handle("/users.info", func(w http.ResponseWriter, r *http.Request) {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.userCalls++
			id := r.FormValue("user")
			name, ok := s.users[id]
			if !ok {
				WriteJSON(w, map[string]any{"ok": false, "error": "user_not_found"})
				return
			}
			// As Slack documents the user object: the display name may be
			// empty, and then people see the real name.
			WriteJSON(w, map[string]any{"ok": true, "user": map[string]any{"id": id, "name": "handle-" + id, "real_name": "Real " + id,
				"profile": map[string]any{"display_name": name, "real_name": "Real " + id}}})
		})
		c.Handle("/files.info", func(w http.ResponseWriter, r *http.Request) {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.calls = append(s.calls, Call{Method: "files.info", Name: r.FormValue("file")})
			file, ok := s.fileInfo[r.FormValue("file")]
			if !ok {
				WriteJSON(w, map[string]any{"ok": false, "error": "file_not_found"})
				return
			}
			WriteJSON(w, map[string]any{"ok": true, "file": file, "comments": []any{}})
		})
		c.Handle("/auth.test", func(w http.ResponseWriter, r *http.Request) {
			if s.failed(w, "auth.test") {
				return
			}
			s.mu.Lock()
			scopes := s.scopes
			s.mu.Unlock()
			if scopes != nil {
				// As Slack reports a token's scopes.
				w.Header().Set("X-OAuth-Scopes", strings.Join(scopes, ","))
			}
			WriteJSON(w, map[string]any{"ok": true, "user_id": BotUser, "bot_id": BotID, "team_id": Team, "user": "baton", "team": "Test Team"})
		})
		c.Handle("/apps.connections.open", func(w http.ResponseWriter, r *http.Request) {
			if s.failed(w, "apps.connections.open") {
				return
			}
			// slacktest's own answer: its websocket.
			WriteJSON(w, map[string]any{"ok": true, "url": slacktest.ServerWSFromContext(r.Context())})
		})
		c.Handle("/conversations.replies", func(w http.ResponseWriter, r *http.Request) {
			if s.failed(w, "conversations.replies") {
				return
			}
			s.mu.Lock()
			defer s.mu.Unlock()
			s.calls = append(s.calls, Call{Method: "conversations.replies", Channel: r.FormValue("channel"), TS: r.FormValue("ts")})
			var thread []Call
			for _, c := range s.calls {
				if c.Method == "chat.postMessage" && c.Channel == r.FormValue("channel") && c.ThreadTS == r.FormValue("ts") {
					thread = append(thread, c)
				}
			}
			writePage(w, r, thread)
		})
		c.Handle("/conversations.history", func(w http.ResponseWriter, r *http.Request) {
			if s.failed(w, "conversations.history") {
				return
			}
			s.mu.Lock()
			defer s.mu.Unlock()
			s.calls = append(s.calls, Call{Method: "conversations.history", Channel: r.FormValue("channel")})
			var top []Call
			for _, c := range slices.Backward(s.calls) {
				if c.Method == "chat.postMessage" && c.Channel == r.FormValue("channel") && c.ThreadTS == "" {
					top = append(top, c)
				}
			}
			writePage(w, r, top)
		})
		c.Handle("/files.getUploadURLExternal", func(w http.ResponseWriter, r *http.Request) {
			if s.failed(w, "files.getUploadURLExternal") {
				return
			}
			base := r.Context().Value(slacktest.ServerURLContextKey).(string)
			s.mu.Lock()
			s.seq++
			id := "F" + strconv.Itoa(s.seq)
			s.calls = append(s.calls, Call{Method: "files.getUploadURLExternal", Name: r.FormValue("filename")})
			s.mu.Unlock()
			WriteJSON(w, map[string]any{"ok": true, "upload_url": base + "upload/" + id, "file_id": id})
		})
		c.Handle("/upload/", func(w http.ResponseWriter, r *http.Request) {
			file, _, err := r.FormFile("file")
			var b []byte
			if err == nil {
				b, _ = io.ReadAll(file)
			} else {
				b, _ = io.ReadAll(r.Body)
			}
			s.mu.Lock()
			s.files[r.URL.Path[len("/upload/"):]] = b
			s.mu.Unlock()
			w.WriteHeader(http.StatusOK)
		})
		c.Handle("/download/", func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") != "Bearer "+BotToken {
				w.WriteHeader(http.StatusForbidden)
				return
			}
			_, _ = io.WriteString(w, "content of "+r.URL.Path[len("/download/"):])
		})
		c.Handle("/files.completeUploadExternal", func(w http.ResponseWriter, r *http.Request) {
			if s.failed(w, "files.completeUploadExternal") {
				return
			}
			var files []map[string]string
			_ = json.Unmarshal([]byte(r.FormValue("files")), &files)
			s.mu.Lock()
			s.calls = append(s.calls, Call{Method: "files.completeUploadExternal", Channel: r.FormValue("channel_id"),
				ThreadTS: r.FormValue("thread_ts"), Text: r.FormValue("initial_comment"), Name: files[0]["id"]})
			s.mu.Unlock()
			WriteJSON(w, map[string]any{"ok": true, "files": []map[string]string{{"id": files[0]["id"], "title": files[0]["title"]}}})
		})
	}
	s.srv = slacktest.NewTestServer(append(extra, bind)...)
	s.srv.Start()
	t.Cleanup(s.srv.Stop)
	return s
}

// writePage answers a page of the posts msgs as conversations.replies and
// conversations.history do: limit messages (default 100) from the cursor,
// an offset.
func writePage(w http.ResponseWriter, r *http.Request, msgs []Call) {
	from, _ := strconv.Atoi(r.FormValue("cursor"))
	limit, err := strconv.Atoi(r.FormValue("limit"))
	if err != nil || limit <= 0 {
		limit = 100
	}
	from = min(max(from, 0), len(msgs))
	to := min(from+limit, len(msgs))
	page := []map[string]any{}
	for _, c := range msgs[from:to] {
		m := map[string]any{"type": "message", "ts": c.Posted, "text": c.Text, "user": BotUser, "bot_id": BotID}
		if c.ThreadTS != "" {
			m["thread_ts"] = c.ThreadTS
		}
		if c.Metadata != "" && r.FormValue("include_all_metadata") == "1" {
			m["metadata"] = json.RawMessage(c.Metadata)
		}
		page = append(page, m)
	}
	resp := map[string]any{"ok": true, "messages": page, "has_more": to < len(msgs)}
	if to < len(msgs) {
		resp["response_metadata"] = map[string]any{"next_cursor": strconv.Itoa(to)}
	}
	WriteJSON(w, resp)
}

// URL returns the Web API's base URL (slack.Config.APIURL), ending in "/".
func (s *Server) URL() string { return s.srv.GetAPIURL() }

// DownloadURL returns the private URL of a file named name: a GET with
// the bot token answers "content of NAME", any other 403.
func (s *Server) DownloadURL(name string) string { return s.URL() + "download/" + name }

// failed answers the planned failure of method, if any.
func (s *Server) failed(w http.ResponseWriter, method string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.limit[method] > 0 {
		s.limit[method]--
		s.limited++
		w.Header().Set("Retry-After", s.retryAfter)
		w.WriteHeader(http.StatusTooManyRequests)
		return true
	}
	if code := s.fail[method]; code != "" {
		WriteJSON(w, map[string]any{"ok": false, "error": code})
		return true
	}
	return false
}

func (s *Server) record(method string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.failed(w, method) {
			return
		}
		s.mu.Lock()
		max, refused := s.maxText[method], false
		if max > 0 && utf8.RuneCountInString(r.FormValue("text")) > max {
			s.refused++
			refused = true
		}
		s.mu.Unlock()
		if refused {
			WriteJSON(w, map[string]any{"ok": false, "error": "msg_too_long"})
			return
		}
		if blocks := r.FormValue("blocks"); blocks != "" && s.refusesBlocks(method, blocks) {
			WriteJSON(w, map[string]any{"ok": false, "error": "invalid_blocks"})
			return
		}
		c := Call{Method: method, Channel: r.FormValue("channel"), TS: r.FormValue("ts"), ThreadTS: r.FormValue("thread_ts"),
			Text: r.FormValue("text"), Name: r.FormValue("name"), Parse: r.FormValue("parse"), LinkNames: r.FormValue("link_names"), User: r.FormValue("user"),
			Blocks: r.FormValue("blocks"), Metadata: r.FormValue("metadata"), Chunks: r.FormValue("chunks")}
		if strings.HasSuffix(method, "Stream") {
			c.At = time.Now()
		}
		if method == "chat.startStream" {
			c.User = r.FormValue("recipient_user_id")
		}
		if method == "assistant.threads.setStatus" {
			c.Channel, c.Text = r.FormValue("channel_id"), r.FormValue("status")
		}
		if method == "reactions.add" || method == "reactions.remove" {
			c.TS = r.FormValue("timestamp")
		}
		s.mu.Lock()
		if s.gone[c.TS] && (method == "chat.appendStream" || method == "chat.stopStream") {
			s.mu.Unlock()
			WriteJSON(w, map[string]any{"ok": false, "error": "message_not_found"})
			return
		}
		s.seq++
		ts := fmt.Sprintf("1700000100.%06d", s.seq)
		if method == "chat.postMessage" || method == "chat.startStream" {
			c.Posted = ts
		}
		if (method == "chat.appendStream" || method == "chat.stopStream") && c.TS != "" {
			ts = c.TS
		}
		s.calls = append(s.calls, c)
		s.mu.Unlock()
		WriteJSON(w, map[string]any{"ok": true, "channel": c.Channel, "ts": ts})
	}
}

// maxSection is the most characters Slack takes in a section block's text.
const maxSection = 3000

// refusesBlocks reports blocks Slack would refuse (a section's text over
// maxSection characters, or no JSON array), or that RefuseBlocks refuses.
func (s *Server) refusesBlocks(method, blocks string) bool {
	s.mu.Lock()
	refuse := s.noBlocks[method]
	s.mu.Unlock()
	var parsed []json.RawMessage
	if refuse || json.Unmarshal([]byte(blocks), &parsed) != nil {
		return true
	}
	return utf8.RuneCountInString(Call{Blocks: blocks}.Section()) > maxSection
}

// DeleteMessage deletes message ts, as a person may: later appends to it
// (a streaming message) answer message_not_found.
func (s *Server) DeleteMessage(ts string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gone == nil {
		s.gone = map[string]bool{}
	}
	s.gone[ts] = true
}

// RefuseBlocks makes every later call of method that carries blocks
// answer invalid_blocks.
func (s *Server) RefuseBlocks(method string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.noBlocks[method] = true
}

// Recorded returns the calls of the given methods (all when none named),
// in the order they came.
func (s *Server) Recorded(methods ...string) []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Call
	for _, c := range s.calls {
		if len(methods) == 0 || slices.Contains(methods, c.Method) {
			out = append(out, c)
		}
	}
	return out
}

// Post is something the bot wrote in a thread: a message posted or
// edited there (Text, Blocks), or the markdown text one call of a
// streaming message carried (Text; Channel and ThreadTS those the stream
// was started with).
type Post struct {
	Method   string
	Channel  string
	ThreadTS string
	Text     string
	Blocks   string
}

// Posts returns what the bot wrote in threads, in order, one entry a
// call: chat.postMessage and chat.update, and the chat.startStream,
// chat.appendStream and chat.stopStream calls that carried markdown text.
func (s *Server) Posts() []Post {
	s.mu.Lock()
	defer s.mu.Unlock()
	streams := map[string]Call{} // stream ts → its chat.startStream
	var out []Post
	for _, c := range s.calls {
		from := c
		switch c.Method {
		case "chat.postMessage", "chat.update":
			out = append(out, Post{Method: c.Method, Channel: c.Channel, ThreadTS: c.ThreadTS, Text: c.Text, Blocks: c.Blocks})
			continue
		case "chat.startStream":
			streams[c.Posted] = c
		case "chat.appendStream", "chat.stopStream":
			start, ok := streams[c.TS]
			if !ok {
				continue
			}
			from = start
		default:
			continue
		}
		var text strings.Builder
		for _, ch := range c.StreamChunks() {
			if ch.Type == "markdown_text" {
				text.WriteString(ch.Text)
			}
		}
		if text.Len() > 0 {
			out = append(out, Post{Method: c.Method, Channel: from.Channel, ThreadTS: from.ThreadTS, Text: text.String()})
		}
	}
	return out
}

// Said returns the texts of Posts in thread root, in order.
func (s *Server) Said(root string) []string {
	var out []string
	for _, p := range s.Posts() {
		if p.ThreadTS == root {
			out = append(out, p.Text)
		}
	}
	return out
}

// Refusals returns how many texts were refused as too long (MaxText).
func (s *Server) Refusals() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refused
}

// File returns the content uploaded as file id ("" for none).
func (s *Server) File(id string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return string(s.files[id])
}

// Fail makes every later call of method answer error code, as Slack
// answers a call it refuses (ok false). It applies to the recorded
// methods, usergroups.users.list, the upload methods, auth.test,
// apps.connections.open, conversations.replies and
// conversations.history.
func (s *Server) Fail(method, code string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail[method] = code
}

// RateLimit makes the next n calls of method answer 429 with
// Retry-After: 7 (SetRetryAfter), before any Fail.
func (s *Server) RateLimit(method string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.limit[method] = n
}

// RateLimited returns how many calls were answered 429 (RateLimit).
func (s *Server) RateLimited() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.limited
}

// SetRetryAfter sets the Retry-After, in seconds, of the 429s RateLimit
// plans (7 by default).
func (s *Server) SetRetryAfter(seconds int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.retryAfter = strconv.Itoa(seconds)
}

// MaxText makes a recorded method refuse a text longer than n characters
// with msg_too_long, as Slack does; 0 accepts any length.
func (s *Server) MaxText(method string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.maxText[method] = n
}

// SetMembers sets the members usergroups.users.list answers for group;
// a group never set is answered no_such_subteam.
func (s *Server) SetMembers(group string, users ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.members[group] = users
}

// MemberCalls returns how many usergroups.users.list calls came.
func (s *Server) MemberCalls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.memberCalls
}

// SetUser makes users.info answer user id with display name name ("":
// none, so people see the real name, "Real ID"); a user never set is
// answered user_not_found.
func (s *Server) SetUser(id, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.users[id] = name
}

// UserCalls returns how many users.info calls came.
func (s *Server) UserCalls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.userCalls
}

// SetScopes makes auth.test report the token's scopes in the
// X-OAuth-Scopes header, as Slack does; until then it sends no such header.
func (s *Server) SetScopes(scopes ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.scopes = append([]string{}, scopes...)
}

// SetFileInfo sets the file object files.info answers for file id; a file
// never set is answered file_not_found.
func (s *Server) SetFileInfo(id string, file map[string]any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fileInfo[id] = file
}

// WriteJSON answers v as JSON, for the routes a test binds itself.
func WriteJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// Sign returns a POST of body to base+path signed as Slack signs its
// requests to an app: HMAC-SHA256 of "v0:timestamp:body" with
// SigningSecret, the timestamp being at.
func Sign(t testing.TB, base, path, body string, at time.Time, contentType string) *http.Request {
	t.Helper()
	r, err := http.NewRequest(http.MethodPost, base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	ts := strconv.FormatInt(at.Unix(), 10)
	mac := hmac.New(sha256.New, []byte(SigningSecret))
	fmt.Fprintf(mac, "v0:%s:%s", ts, body)
	r.Header.Set("X-Slack-Request-Timestamp", ts)
	r.Header.Set("X-Slack-Signature", "v0="+hex.EncodeToString(mac.Sum(nil)))
	r.Header.Set("Content-Type", contentType)
	return r
}

// MentionEvent is an app_mention callback in channel C1 as Slack
// documents it; threadTS "" for a mention outside a thread.
func MentionEvent(eventID, user, text, ts, threadTS string) string {
	ev := map[string]any{"type": "app_mention", "user": user, "text": text, "ts": ts, "channel": "C1", "event_ts": ts}
	if threadTS != "" {
		ev["thread_ts"] = threadTS
	}
	return Callback(eventID, ev)
}

// MessageEvent is a message callback in channel C1.
func MessageEvent(eventID, user, text, ts, threadTS string) string {
	ev := map[string]any{"type": "message", "user": user, "text": text, "ts": ts, "channel": "C1", "channel_type": "channel", "event_ts": ts}
	if threadTS != "" {
		ev["thread_ts"] = threadTS
	}
	return Callback(eventID, ev)
}

// Callback is the event_callback envelope of ev from workspace Team.
func Callback(eventID string, ev map[string]any) string {
	b, _ := json.Marshal(map[string]any{
		"token": "XXYYZZ", "team_id": Team, "api_app_id": "A1", "type": "event_callback", "event_id": eventID,
		"event_time": 1700000000, "event": ev,
	})
	return string(b)
}

// triggers numbers the trigger_id of each interaction BlockActions makes.
var triggers atomic.Int64

// BlockActions is a block_actions interaction as Slack sends it when user
// clicks the button with value on message ts of channel (in the thread
// under threadTS; "" when the message is a root or in a direct-message
// channel), in workspace Team; each has a trigger_id of its own. It is
// the payload field of Interaction's form and, as is, the payload of a
// Socket Mode interactive envelope.
func BlockActions(value, user, channel, ts, threadTS string) string {
	n := triggers.Add(1)
	msg := map[string]any{"type": "message", "user": BotUser, "bot_id": BotID, "text": "the message", "ts": ts}
	container := map[string]any{"type": "message", "message_ts": ts, "channel_id": channel, "is_ephemeral": false}
	if threadTS != "" {
		msg["thread_ts"] = threadTS
		container["thread_ts"] = threadTS
	}
	b, _ := json.Marshal(map[string]any{
		"type":         "block_actions",
		"user":         map[string]any{"id": user, "username": "handle-" + user, "name": "handle-" + user, "team_id": Team},
		"api_app_id":   "A1",
		"token":        "XXYYZZ",
		"container":    container,
		"trigger_id":   fmt.Sprintf("%d.1234.abcdef%d", 1700000000+n, n),
		"team":         map[string]any{"id": Team, "domain": "baton-test"},
		"channel":      map[string]any{"id": channel, "name": "general"},
		"message":      msg,
		"response_url": "https://hooks.slack.invalid/actions/T1/1/x",
		"actions": []any{map[string]any{"type": "button", "action_id": "baton_0", "block_id": "baton_actions", "value": value,
			"text": map[string]any{"type": "plain_text", "text": "a button", "emoji": true}, "action_ts": fmt.Sprintf("1700000200.%06d", n)}},
	})
	return string(b)
}

// Interaction returns a POST of payload (BlockActions) to
// base+/slack/interactions, form-encoded and signed at at, as Slack sends
// a click to an HTTP-mode app.
func Interaction(t testing.TB, base, payload string, at time.Time) *http.Request {
	t.Helper()
	return Sign(t, base, "/slack/interactions", url.Values{"payload": {payload}}.Encode(), at, "application/x-www-form-urlencoded")
}

// ErrDiskFull is what SQLite says when the disk is full; BrokenInbox
// answers it.
var ErrDiskFull = errors.New("database or disk is full (13)")

// BrokenInbox is a store's inbox whose reads and writes all fail with
// ErrDiskFull while it is down (as it is from the start), as on a full
// disk. It is safe for concurrent use.
type BrokenInbox struct {
	core.InboxStore
	down    atomic.Bool
	refused chan struct{}
	removed atomic.Int64
}

// NewBrokenInbox returns a BrokenInbox over st, down.
func NewBrokenInbox(st core.InboxStore) *BrokenInbox {
	b := &BrokenInbox{InboxStore: st, refused: make(chan struct{}, 16)}
	b.down.Store(true)
	return b
}

// SetDown sets whether the inbox fails.
func (b *BrokenInbox) SetDown(down bool) { b.down.Store(down) }

// Refused hears of the adds refused while down (some may be dropped
// when nobody listens).
func (b *BrokenInbox) Refused() <-chan struct{} { return b.refused }

// Removed returns how many events were handled and removed (InboxDone
// succeeded).
func (b *BrokenInbox) Removed() int64 { return b.removed.Load() }

// AddInbox implements core.InboxStore.
func (b *BrokenInbox) AddInbox(ctx context.Context, e core.InboxEvent) (core.InboxEvent, bool, error) {
	if b.down.Load() {
		select {
		case b.refused <- struct{}{}:
		default:
		}
		return core.InboxEvent{}, false, ErrDiskFull
	}
	return b.InboxStore.AddInbox(ctx, e)
}

// ClaimInbox implements core.InboxStore.
func (b *BrokenInbox) ClaimInbox(ctx context.Context, p core.Platform, now time.Time, lease time.Duration, limit int) ([]core.InboxEvent, error) {
	if b.down.Load() {
		return nil, ErrDiskFull
	}
	return b.InboxStore.ClaimInbox(ctx, p, now, lease, limit)
}

// InboxRetry implements core.InboxStore.
func (b *BrokenInbox) InboxRetry(ctx context.Context, id int64, next time.Time, lastErr string) error {
	if b.down.Load() {
		return ErrDiskFull
	}
	return b.InboxStore.InboxRetry(ctx, id, next, lastErr)
}

// InboxDone implements core.InboxStore.
func (b *BrokenInbox) InboxDone(ctx context.Context, id int64) error {
	if b.down.Load() {
		return ErrDiskFull
	}
	err := b.InboxStore.InboxDone(ctx, id)
	if err == nil {
		b.removed.Add(1)
	}
	return err
}

var _ core.InboxStore = (*BrokenInbox)(nil)
