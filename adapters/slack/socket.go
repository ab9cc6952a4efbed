package slack

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/baton-bot/baton/core/chat"
	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"
	"github.com/slack-go/slack/socketmode"
)

// runSocket runs the Socket Mode connection until ctx ends. slack-go
// reconnects after a drop or a disconnect request. An event's envelope, and
// an interactive one of a click on a button (block_actions), is
// acknowledged once its payload is committed to the inbox, and the payload
// then handed to the workers; when the inbox write fails, the backlog is
// full or Run is shutting down, the envelope is not acknowledged: Slack
// sends an event again, and shows the clicker that the click failed. A
// slash command is acknowledged with its answer; other envelopes as soon
// as they are read.
func (a *Adapter) runSocket(ctx context.Context) error {
	sm := socketmode.New(a.api, socketmode.OptionLog(slog.NewLogLogger(a.log.Handler(), slog.LevelDebug)))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- sm.RunContext(ctx) }()
	for {
		select {
		case <-ctx.Done():
			<-done
			return nil
		case err := <-done:
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("slack socket mode: %w", err)
		case ev := <-sm.Events:
			if err := a.socketEvent(ctx, sm, ev); err != nil {
				cancel()
				<-done
				return err
			}
		}
	}
}

// socketEvent handles one Socket Mode event; it returns an error only
// when the connection cannot go on.
func (a *Adapter) socketEvent(ctx context.Context, sm *socketmode.Client, ev socketmode.Event) error {
	switch ev.Type {
	case socketmode.EventTypeConnecting:
		a.log.Info("connecting to slack socket mode")
	case socketmode.EventTypeConnected:
		a.log.Info("connected to slack socket mode")
	case socketmode.EventTypeHello:
		a.touch()
	case socketmode.EventTypeDisconnect:
		a.log.Info("slack asked to reconnect")
	case socketmode.EventTypeConnectionError, socketmode.EventTypeIncomingError, socketmode.EventTypeErrorBadMessage, socketmode.EventTypeErrorWriteFailed:
		a.log.Warn("slack socket mode trouble", "type", string(ev.Type), "err", ev.Data)
	case socketmode.EventTypeInvalidAuth:
		a.log.Error("slack refused the app token; check SLACK_APP_TOKEN")
		return fmt.Errorf("slack socket mode: invalid app token: %w", chat.ErrPermanent)
	case socketmode.EventTypeEventsAPI:
		if ev.Request == nil {
			return nil
		}
		a.touch()
		e, ok := ev.Data.(slackevents.EventsAPIEvent)
		if !ok || e.Type != slackevents.CallbackEvent {
			a.ack(ctx, sm, ev.Request, nil)
			return nil
		}
		if ev.Request.RetryAttempt > 0 {
			a.log.Debug("slack retried an event", "retry", ev.Request.RetryAttempt, "reason", ev.Request.RetryReason)
		}
		cb, _ := e.Data.(*slackevents.EventsAPICallbackEvent)
		if err := a.take(ctx, eventKey(cb), ev.Request.Payload); err != nil {
			a.log.Warn("a slack event not acknowledged; slack will send it again", "envelope", ev.Request.EnvelopeID, "why", err)
			return nil
		}
		a.ack(ctx, sm, ev.Request, nil)
	case socketmode.EventTypeSlashCommand:
		if ev.Request == nil {
			return nil
		}
		a.touch()
		sc, ok := ev.Data.(slack.SlashCommand)
		if !ok {
			a.ack(ctx, sm, ev.Request, nil)
			return nil
		}
		// The answer travels with the ack, which must come within 3 s;
		// slash gives one within CommandWait, so the loop waits.
		a.ack(ctx, sm, ev.Request, ephemeral(a.slash(ctx, sc)))
	case socketmode.EventTypeInteractive:
		if ev.Request == nil {
			return nil
		}
		a.touch()
		ic, ok := ev.Data.(slack.InteractionCallback)
		if !ok || ic.Type != slack.InteractionTypeBlockActions {
			a.ack(ctx, sm, ev.Request, nil) // nothing Baton shows sends these
			return nil
		}
		// As an event: acknowledged once in the inbox, and handled by the
		// workers, within Slack's 3 s whatever the click does.
		if err := a.take(ctx, interactionKey(ic), ev.Request.Payload); err != nil {
			a.log.Warn("a slack click not acknowledged; its clicker sees it fail", "envelope", ev.Request.EnvelopeID, "why", err)
			return nil
		}
		a.ack(ctx, sm, ev.Request, nil)
	}
	return nil
}

func (a *Adapter) ack(ctx context.Context, sm *socketmode.Client, req *socketmode.Request, payload any) {
	if err := sm.AckCtx(ctx, req.EnvelopeID, payload); err != nil && !errors.Is(err, context.Canceled) {
		a.log.Warn("acknowledging a slack envelope failed", "envelope", req.EnvelopeID, "err", err)
	}
}
