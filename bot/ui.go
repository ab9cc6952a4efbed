package main

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/baton-bot/baton/adapters/web"
	"github.com/baton-bot/baton/core"
)

// mountUI serves the operator dashboard at /ui/ on mux (admin.addr's, or
// http.addr's without it) when ui.token is set.
func (m *Main) mountUI(sys *system, mux *http.ServeMux) error {
	token := m.Config.UI.Token.Reveal()
	if token == "" || sys.chat == nil {
		return nil
	}
	cfg := web.Config{Token: token, Logger: m.Logger.With("component", "ui"), Links: threadLink}
	if o := m.Config.UI.OIDC; o.Issuer != "" {
		cfg.OIDC = &web.OIDC{Issuer: o.Issuer, ClientID: o.ClientID, ClientSecret: o.ClientSecret.Reveal(), RedirectURL: o.RedirectURL, Allowed: o.Allowed}
	}
	ui, err := web.New(sys.store, sys.chat, cfg)
	if err != nil {
		return fmt.Errorf("ui: %w", err)
	}
	mux.Handle("/ui/", ui.Handler())
	m.Logger.Info("operator dashboard on /ui/")
	return nil
}

// threadLink is the address of a Slack or Discord task's thread; "" for
// other platforms.
func threadLink(t core.Task) string {
	th := t.Thread
	switch th.Platform {
	case core.PlatformSlack:
		if th.Team == "" || th.Channel == "" {
			return ""
		}
		u := "https://app.slack.com/client/" + url.PathEscape(th.Team) + "/" + url.PathEscape(th.Channel)
		if th.Thread != "" && th.Thread != th.Channel {
			u += "/thread/" + url.PathEscape(th.Channel+"-"+th.Thread)
		}
		return u
	case core.PlatformDiscord:
		if th.Team == "" {
			return "https://discord.com/channels/@me/" + url.PathEscape(strings.TrimSpace(th.Thread))
		}
		return "https://discord.com/channels/" + url.PathEscape(th.Team) + "/" + url.PathEscape(th.Thread)
	}
	return ""
}
