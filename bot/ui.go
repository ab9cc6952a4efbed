package main

import (
	"fmt"
	"net/http"

	"github.com/baton-bot/baton/adapters/web"
)

// mountUI serves the operator dashboard at /ui/ on mux (admin.addr's, or
// http.addr's without it) when ui.token is set.
func (m *Main) mountUI(sys *system, mux *http.ServeMux) error {
	token := m.Config.UI.Token.Reveal()
	if token == "" || sys.chat == nil {
		return nil
	}
	ui, err := web.New(sys.store, sys.chat, web.Config{Token: token, Logger: m.Logger.With("component", "ui")})
	if err != nil {
		return fmt.Errorf("ui: %w", err)
	}
	mux.Handle("/ui/", ui.Handler())
	m.Logger.Info("operator dashboard on /ui/")
	return nil
}
