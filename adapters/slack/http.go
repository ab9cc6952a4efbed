package slack

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/chat"
	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"
)

// maxBody caps a request from Slack; its events are a few kilobytes.
const maxBody = 1 << 20

// Handler returns the Events API handler (HTTP mode): POST /slack/events,
// /slack/commands and /slack/interactions, to mount on the http.addr
// server's mux as mux.Handle("/slack/", h).
//
// Every request must carry Slack's signature over its body, made with the
// signing secret, and a timestamp within 5 minutes: otherwise it is
// answered 401 and nothing is handed over. An event is acknowledged (200)
// once it is committed to the inbox, and then handed to the service by
// Run's workers; when the inbox write fails (a full disk, a broken store)
// or takes longer than 2 s, the answer is 500 and Slack sends the event
// again, so that an event answered 200 is never lost: a failed handling,
// a crash or a shutdown leaves it in the inbox to be handled again (see
// Run). A retry of Slack's (X-Slack-Retry-Num) is acknowledged and handed
// over too unless the inbox holds it still, the service dropping the
// repeat. When the backlog is full, or Run is shutting down, the answer is
// 503, and Slack tries again later.
func (a *Adapter) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /slack/events", a.serveEvents)
	mux.HandleFunc("POST /slack/commands", a.serveCommand)
	mux.HandleFunc("POST /slack/interactions", a.serveInteraction)
	return mux
}

// verify reads the body of a request and checks Slack's signature; it
// answers the request itself (400, 401) when that fails.
func (a *Adapter) verify(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		http.Error(w, "unreadable body", http.StatusBadRequest)
		return nil, false
	}
	sv, err := slack.NewSecretsVerifier(r.Header, a.cfg.SigningSecret)
	if err == nil {
		_, _ = sv.Write(body)
		err = sv.Ensure()
	}
	if err != nil {
		a.log.Warn("refused a request without a valid slack signature", "path", r.URL.Path, "remote", r.RemoteAddr, "err", err)
		http.Error(w, "invalid signature", http.StatusUnauthorized)
		return nil, false
	}
	return body, true
}

func (a *Adapter) serveEvents(w http.ResponseWriter, r *http.Request) {
	body, ok := a.verify(w, r)
	if !ok {
		return
	}
	var outer struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(body, &outer); err != nil || outer.Type == "" {
		http.Error(w, "malformed event", http.StatusBadRequest)
		return
	}
	ev, err := slackevents.ParseEvent(json.RawMessage(body), slackevents.OptionNoVerifyToken())
	if err != nil {
		// An event type slack-go does not know, or a shape it cannot read:
		// acknowledged so that Slack does not send it again.
		a.log.Warn("slack event not understood", "type", outer.Type, "err", err)
		w.WriteHeader(http.StatusOK)
		return
	}
	switch ev.Type {
	case slackevents.URLVerification:
		v, _ := ev.Data.(*slackevents.EventsAPIURLVerificationEvent)
		if v == nil {
			http.Error(w, "malformed challenge", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, v.Challenge)
	case slackevents.CallbackEvent:
		a.touch()
		if n := r.Header.Get("X-Slack-Retry-Num"); n != "" {
			a.log.Debug("slack retried an event", "retry", n, "reason", r.Header.Get("X-Slack-Retry-Reason"))
		}
		cb, _ := ev.Data.(*slackevents.EventsAPICallbackEvent)
		a.accept(w, r, eventKey(cb), body)
	case slackevents.AppRateLimited:
		a.log.Warn("slack is rate limiting the events sent to baton")
		w.WriteHeader(http.StatusOK)
	default:
		w.WriteHeader(http.StatusOK)
	}
}

// accept takes an event or an interaction (take) and answers the request:
// 200 once it is in the inbox, 503 when the backlog is full or Run is
// shutting down, 500 when the inbox write failed. Slack sends an event
// refused so again; a refused click shows its clicker an error, and the
// log says why.
func (a *Adapter) accept(w http.ResponseWriter, r *http.Request, key string, payload []byte) {
	switch err := a.take(r.Context(), key, payload); {
	case errors.Is(err, errBacklogFull), errors.Is(err, errClosed):
		a.log.Warn("slack delivery refused: an event is sent again, a click shown failed", "path", r.URL.Path, "why", err)
		http.Error(w, "busy", http.StatusServiceUnavailable)
	case err != nil:
		a.log.Error("a slack delivery could not be stored; answered 500 (an event is sent again, a click shown failed)", "path", r.URL.Path, "err", err)
		http.Error(w, "not stored", http.StatusInternalServerError)
	default:
		w.WriteHeader(http.StatusOK)
	}
}

func (a *Adapter) serveCommand(w http.ResponseWriter, r *http.Request) {
	body, ok := a.verify(w, r)
	if !ok {
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	sc, err := slack.SlashCommandParse(r)
	if err != nil {
		http.Error(w, "malformed command", http.StatusBadRequest)
		return
	}
	a.touch()
	writeJSON(w, ephemeral(a.slash(r.Context(), sc)))
}

// ephemeral is a slash command's answer, shown to the caller alone.
func ephemeral(text string) map[string]string {
	return map[string]string{"response_type": "ephemeral", "text": render(text)}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// Texts of the adapter's own answers to slash commands.
const (
	textWorking = "Working on it — the answer follows in a moment."
	textBusy    = "Baton is busy; try again in a moment."
	textFailed  = "Sorry, that did not work; try again later."
)

// commandTimeout bounds a slash command that outlived CommandWait.
const commandTimeout = time.Minute

// slash runs a /baton command and returns what to answer at once: the
// result when the service gives it within CommandWait, else a "working on
// it" note, the result following through response_url. Another command of
// the app (one not renamed in slack.command, or added in the manifest) is
// answered with a note naming the command Baton serves, and nothing runs.
func (a *Adapter) slash(ctx context.Context, sc slack.SlashCommand) string {
	if !strings.EqualFold(strings.TrimSpace(sc.Command), a.cfg.Command) {
		a.log.Info("slash command not baton's answered with a note", "command", sc.Command, "serves", a.cfg.Command)
		return chat.Say(a.cfg.Locale, "slash_other", "command", a.cfg.Command, "other", sc.Command)
	}
	c := command(sc)
	select {
	case a.commands <- struct{}{}:
	default:
		return textBusy
	}
	result := make(chan string) // the result, while slash still waits
	gaveUp := make(chan struct{})
	go func() {
		defer func() { <-a.commands }()
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commandTimeout)
		defer cancel()
		c.Author.Groups = a.groups.of(cctx, sc.UserID)
		r, err := a.svc.HandleCommand(cctx, c)
		text := r.Text
		if err != nil {
			a.log.Error("slash command failed", "command", c.Name, "err", err)
			text = textFailed
		}
		select {
		case result <- text:
		case <-gaveUp:
			if sc.ResponseURL == "" {
				return
			}
			msg := &slack.WebhookMessage{ResponseType: "ephemeral", Text: render(text)}
			if err := slack.PostWebhookCustomHTTPContext(cctx, sc.ResponseURL, a.http, msg); err != nil {
				a.log.Warn("sending a slash command's late answer failed", "command", c.Name, "err", err)
			}
		}
	}()
	t := time.NewTimer(a.cfg.CommandWait)
	defer t.Stop()
	select {
	case text := <-result:
		return text
	case <-t.C:
		close(gaveUp)
		return textWorking
	}
}

// command translates a slash command; an empty one asks for help.
func command(sc slack.SlashCommand) chat.Command {
	name, args, _ := strings.Cut(strings.TrimSpace(sc.Text), " ")
	name = strings.ToLower(strings.TrimSpace(name))
	if name == "" {
		name = "help"
	}
	return chat.Command{
		Name:    name,
		Args:    strings.TrimSpace(args),
		Thread:  core.ThreadRef{Platform: core.PlatformSlack, Team: sc.TeamID, Channel: sc.ChannelID},
		Direct:  sc.ChannelName == "directmessage" || isDirect(sc.ChannelID),
		Channel: "slack:" + sc.ChannelID,
		Author:  chat.Author{ID: "slack:" + sc.UserID, Name: sc.UserName},
	}
}
