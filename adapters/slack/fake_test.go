package slack

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/slack-go/slack/slacktest"
)

// call is one Web API call the fake Slack received.
type call struct {
	Method    string
	Channel   string
	TS        string // the message edited or reacted to
	ThreadTS  string
	Text      string
	Name      string // reaction or file name
	Parse     string
	LinkNames string
	User      string // chat.postEphemeral
}

// fakeSlack is the Web API on slacktest's server, with the routes
// slacktest lacks, recording every call Baton makes.
type fakeSlack struct {
	srv *slacktest.Server

	mu     sync.Mutex
	calls  []call            // guarded by mu
	fail   map[string]string // guarded by mu: method → error code to answer
	limit  map[string]int    // guarded by mu: method → 429s to answer first
	seq    int               // guarded by mu: last ts handed out
	thread []map[string]any  // guarded by mu: conversations.replies answer
	files  map[string][]byte // guarded by mu: uploaded content by file id
	// maxText: method → the most characters of text it accepts; longer
	// texts are answered msg_too_long and counted in refused.
	maxText map[string]int // guarded by mu
	refused int            // guarded by mu
	// members: user group id → its members (usergroups.users.list); a
	// group not listed is answered no_such_subteam. memberCalls counts
	// the calls.
	members     map[string][]string // guarded by mu
	memberCalls int                 // guarded by mu
	// users: user id → display name (users.info); a user not listed is
	// answered user_not_found. userCalls counts the calls.
	users     map[string]string // guarded by mu
	userCalls int               // guarded by mu
	// fileInfo: file id → the file object files.info answers; a file not
	// listed is answered file_not_found.
	fileInfo map[string]map[string]any // guarded by mu
}

const (
	botUser = "UBATON"
	botID   = "BBATON"
	team    = "T1"
)

func newFakeSlack(t testing.TB, extra ...slacktest.Binder) *fakeSlack {
	t.Helper()
	f := &fakeSlack{fail: map[string]string{}, limit: map[string]int{}, files: map[string][]byte{}, maxText: map[string]int{},
		members: map[string][]string{}, users: map[string]string{}, fileInfo: map[string]map[string]any{}}
	bind := func(c slacktest.Customize) {
		for _, m := range []string{"chat.postMessage", "chat.update", "chat.postEphemeral", "reactions.add", "reactions.remove"} {
			c.Handle("/"+m, f.record(m))
		}
		c.Handle("/usergroups.users.list", func(w http.ResponseWriter, r *http.Request) {
			if f.failed(w, "usergroups.users.list") {
				return
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			f.memberCalls++
			users, ok := f.members[r.FormValue("usergroup")]
			if !ok {
				writeJSONT(w, map[string]any{"ok": false, "error": "no_such_subteam"})
				return
			}
			writeJSONT(w, map[string]any{"ok": true, "users": users})
		})
		c.Handle("/users.info", func(w http.ResponseWriter, r *http.Request) {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.userCalls++
			id := r.FormValue("user")
			name, ok := f.users[id]
			if !ok {
				writeJSONT(w, map[string]any{"ok": false, "error": "user_not_found"})
				return
			}
			// As Slack documents the user object: the display name may be
			// empty, and then people see the real name.
			writeJSONT(w, map[string]any{"ok": true, "user": map[string]any{"id": id, "name": "handle-" + id, "real_name": "Real " + id,
				"profile": map[string]any{"display_name": name, "real_name": "Real " + id}}})
		})
		c.Handle("/files.info", func(w http.ResponseWriter, r *http.Request) {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.calls = append(f.calls, call{Method: "files.info", Name: r.FormValue("file")})
			file, ok := f.fileInfo[r.FormValue("file")]
			if !ok {
				writeJSONT(w, map[string]any{"ok": false, "error": "file_not_found"})
				return
			}
			writeJSONT(w, map[string]any{"ok": true, "file": file, "comments": []any{}})
		})
		c.Handle("/auth.test", func(w http.ResponseWriter, r *http.Request) {
			writeJSONT(w, map[string]any{"ok": true, "user_id": botUser, "bot_id": botID, "team_id": team, "user": "baton"})
		})
		c.Handle("/conversations.replies", func(w http.ResponseWriter, r *http.Request) {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.calls = append(f.calls, call{Method: "conversations.replies", Channel: r.FormValue("channel"), TS: r.FormValue("ts")})
			writeJSONT(w, map[string]any{"ok": true, "messages": f.thread, "has_more": false})
		})
		c.Handle("/files.getUploadURLExternal", func(w http.ResponseWriter, r *http.Request) {
			if f.failed(w, "files.getUploadURLExternal") {
				return
			}
			base := r.Context().Value(slacktest.ServerURLContextKey).(string)
			f.mu.Lock()
			f.seq++
			id := "F" + strconv.Itoa(f.seq)
			f.calls = append(f.calls, call{Method: "files.getUploadURLExternal", Name: r.FormValue("filename")})
			f.mu.Unlock()
			writeJSONT(w, map[string]any{"ok": true, "upload_url": base + "upload/" + id, "file_id": id})
		})
		c.Handle("/upload/", func(w http.ResponseWriter, r *http.Request) {
			file, _, err := r.FormFile("file")
			var b []byte
			if err == nil {
				b, _ = io.ReadAll(file)
			} else {
				b, _ = io.ReadAll(r.Body)
			}
			f.mu.Lock()
			f.files[r.URL.Path[len("/upload/"):]] = b
			f.mu.Unlock()
			w.WriteHeader(http.StatusOK)
		})
		c.Handle("/download/", func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") != "Bearer xoxb-test" {
				w.WriteHeader(http.StatusForbidden)
				return
			}
			_, _ = io.WriteString(w, "content of "+r.URL.Path[len("/download/"):])
		})
		c.Handle("/files.completeUploadExternal", func(w http.ResponseWriter, r *http.Request) {
			if f.failed(w, "files.completeUploadExternal") {
				return
			}
			var files []map[string]string
			_ = json.Unmarshal([]byte(r.FormValue("files")), &files)
			f.mu.Lock()
			f.calls = append(f.calls, call{Method: "files.completeUploadExternal", Channel: r.FormValue("channel_id"),
				ThreadTS: r.FormValue("thread_ts"), Text: r.FormValue("initial_comment"), Name: files[0]["id"]})
			f.mu.Unlock()
			writeJSONT(w, map[string]any{"ok": true, "files": []map[string]string{{"id": files[0]["id"], "title": files[0]["title"]}}})
		})
	}
	f.srv = slacktest.NewTestServer(append(extra, bind)...)
	f.srv.Start()
	t.Cleanup(f.srv.Stop)
	return f
}

func (f *fakeSlack) url() string { return f.srv.GetAPIURL() }

// failed answers the planned failure of method, if any.
func (f *fakeSlack) failed(w http.ResponseWriter, method string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.limit[method] > 0 {
		f.limit[method]--
		w.Header().Set("Retry-After", "7")
		w.WriteHeader(http.StatusTooManyRequests)
		return true
	}
	if code := f.fail[method]; code != "" {
		writeJSONT(w, map[string]any{"ok": false, "error": code})
		return true
	}
	return false
}

func (f *fakeSlack) record(method string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if f.failed(w, method) {
			return
		}
		f.mu.Lock()
		max, refused := f.maxText[method], false
		if max > 0 && utf8.RuneCountInString(r.FormValue("text")) > max {
			f.refused++
			refused = true
		}
		f.mu.Unlock()
		if refused {
			writeJSONT(w, map[string]any{"ok": false, "error": "msg_too_long"})
			return
		}
		c := call{Method: method, Channel: r.FormValue("channel"), TS: r.FormValue("ts"), ThreadTS: r.FormValue("thread_ts"),
			Text: r.FormValue("text"), Name: r.FormValue("name"), Parse: r.FormValue("parse"), LinkNames: r.FormValue("link_names"), User: r.FormValue("user")}
		if method == "reactions.add" || method == "reactions.remove" {
			c.TS = r.FormValue("timestamp")
		}
		f.mu.Lock()
		f.seq++
		ts := fmt.Sprintf("1700000100.%06d", f.seq)
		f.calls = append(f.calls, c)
		f.mu.Unlock()
		writeJSONT(w, map[string]any{"ok": true, "channel": c.Channel, "ts": ts})
	}
}

// recorded returns the calls of the given methods (all when none named).
func (f *fakeSlack) recorded(methods ...string) []call {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []call
	for _, c := range f.calls {
		if len(methods) == 0 || contains(methods, c.Method) {
			out = append(out, c)
		}
	}
	return out
}

// refusals returns how many texts were refused as too long.
func (f *fakeSlack) refusals() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.refused
}

// file returns the content uploaded as file id.
func (f *fakeSlack) file(id string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return string(f.files[id])
}

func (f *fakeSlack) setFail(method, code string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail[method] = code
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func writeJSONT(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
