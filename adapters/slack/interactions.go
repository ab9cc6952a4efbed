package slack

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/chat"
	"github.com/slack-go/slack"
)

// Clicks on Baton's buttons (Poster.PostButtons) arrive as block_actions
// interactions: on POST /slack/interactions in HTTP mode, as interactive
// envelopes in Socket Mode. Either way a click is handled as an event is:
// committed to the inbox before Slack is answered (which Slack wants
// within 3 s), then handed to Service.HandleAction by Run's workers, under
// their context, so that a click answered is neither lost at shutdown nor
// when the service fails (it is tried again, and the service makes the
// repeat harmless). What the service answers goes to the clicker alone
// (chat.postEphemeral in the message's thread).

// serveInteraction answers POST /slack/interactions: signed as
// /slack/events is (verify), its body a form whose payload field is the
// interaction's JSON.
func (a *Adapter) serveInteraction(w http.ResponseWriter, r *http.Request) {
	body, ok := a.verify(w, r)
	if !ok {
		return
	}
	form, err := url.ParseQuery(string(body))
	payload := form.Get("payload")
	if err != nil || payload == "" {
		http.Error(w, "malformed interaction", http.StatusBadRequest)
		return
	}
	var ic slack.InteractionCallback
	if err := json.Unmarshal([]byte(payload), &ic); err != nil || ic.Type == "" {
		http.Error(w, "malformed interaction", http.StatusBadRequest)
		return
	}
	a.touch()
	if ic.Type != slack.InteractionTypeBlockActions {
		a.log.Debug("slack interaction ignored", "type", ic.Type)
		w.WriteHeader(http.StatusOK) // nothing Baton shows sends these
		return
	}
	a.accept(w, r, interactionKey(ic), []byte(payload))
}

// interactionKey is the inbox key of a click: its trigger_id, which Slack
// makes for each interaction ("" when it has none: the payload's hash).
func interactionKey(ic slack.InteractionCallback) string {
	if ic.TriggerID == "" {
		return ""
	}
	return "interaction:" + ic.TriggerID
}

// interactive reports whether an inbox payload is a block_actions
// interaction rather than an Events API event (type event_callback).
func interactive(payload []byte) bool {
	var outer struct {
		Type string `json:"type"`
	}
	return json.Unmarshal(payload, &outer) == nil && outer.Type == string(slack.InteractionTypeBlockActions)
}

// interaction hands each button clicked in a block_actions interaction to
// the service and shows its reply to the clicker alone. Clicks on
// something other than a message (a view, the app's home) are dropped. An
// error means the click was not handled and should be tried again.
func (a *Adapter) interaction(ctx context.Context, ic slack.InteractionCallback) error {
	me, err := a.identity(ctx)
	if err != nil {
		return fmt.Errorf("who the bot is: %w", err)
	}
	base, ok := clicked(ic, me.team)
	if !ok || ic.User.ID == "" {
		a.log.Debug("slack click not on a message ignored", "container", ic.Container.Type)
		return nil
	}
	user := ic.User.ID
	base.Author = a.author(ctx, user, "")
	base.Author.Name, _ = a.users.lookup(ctx)(user)
	for _, act := range ic.ActionCallback.BlockActions {
		if act == nil || act.Value == "" {
			continue // not one of Baton's buttons: each has a value
		}
		x := base
		x.Value = act.Value
		reply, err := a.svc.HandleAction(ctx, x)
		if err != nil {
			return fmt.Errorf("handle the click %q on %s in %s: %w", x.Value, x.MsgID, x.Thread.Channel, err)
		}
		a.answer(ctx, x.Thread, user, reply)
	}
	return nil
}

// clicked is the chat.Action of a click on a message, without its Value
// and Author: the thread is the message's, named as inbound messages name
// theirs (a direct-message channel is one thread; in a channel, the
// thread's root, or the message itself when it is the root). It reports
// false when the click was not on a message.
func clicked(ic slack.InteractionCallback, team string) (chat.Action, bool) {
	channel := ic.Container.ChannelID
	if channel == "" {
		channel = ic.Channel.ID
	}
	ts := ic.Container.MessageTs
	if ts == "" {
		ts = ic.Message.Timestamp
	}
	if channel == "" || ts == "" {
		return chat.Action{}, false
	}
	root := ic.Message.ThreadTimestamp
	if root == "" {
		root = ic.Container.ThreadTs
	}
	if root == "" {
		root = ts
	}
	direct := isDirect(channel)
	if direct {
		root = channel
	}
	if ic.Team.ID != "" {
		team = ic.Team.ID
	}
	return chat.Action{
		Thread:  core.ThreadRef{Platform: core.PlatformSlack, Team: team, Channel: channel, Thread: root},
		Channel: "slack:" + channel,
		MsgID:   ts,
		Direct:  direct,
	}, true
}
