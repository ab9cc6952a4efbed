package web

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
)

// OIDC configures the login through an OpenID Connect provider, beside
// the token's: the provider's verified e-mail address must be allowed.
type OIDC struct {
	Issuer       string // the provider's issuer URL (its discovery document is read at the first login)
	ClientID     string
	ClientSecret string
	// RedirectURL is where the provider sends the browser back: this
	// UI's /ui/login/oidc/callback as the browser reaches it.
	RedirectURL string
	// Allowed lists the addresses ("ann@example.com") and domains
	// ("@example.com") that may log in. Empty: nobody.
	Allowed []string
}

// oidcCookie holds a login's state and nonce between the redirect to the
// provider and its answer. SameSite=Lax: the answer is a top-level
// navigation from the provider's site.
const oidcCookie = "baton_ui_oidc"

// oidcClient is the provider, discovered once.
type oidcClient struct {
	cfg OIDC

	mu       sync.Mutex // guards the fields below
	oauth    *oauth2.Config
	verifier *oidc.IDTokenVerifier
}

func (c *oidcClient) discover(ctx context.Context) (*oauth2.Config, *oidc.IDTokenVerifier, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.oauth != nil {
		return c.oauth, c.verifier, nil
	}
	p, err := oidc.NewProvider(ctx, c.cfg.Issuer)
	if err != nil {
		return nil, nil, fmt.Errorf("discover the OIDC provider: %w", err)
	}
	c.oauth = &oauth2.Config{ClientID: c.cfg.ClientID, ClientSecret: c.cfg.ClientSecret, RedirectURL: c.cfg.RedirectURL,
		Endpoint: p.Endpoint(), Scopes: []string{oidc.ScopeOpenID, "email"}}
	c.verifier = p.Verifier(&oidc.Config{ClientID: c.cfg.ClientID})
	return c.oauth, c.verifier, nil
}

// allowed reports whether the verified address email may log in.
func (c *oidcClient) allowed(email string) bool {
	email = strings.ToLower(strings.TrimSpace(email))
	_, domain, ok := strings.Cut(email, "@")
	if !ok || domain == "" {
		return false
	}
	for _, a := range c.cfg.Allowed {
		a = strings.ToLower(strings.TrimSpace(a))
		if a == email || a == "@"+domain {
			return true
		}
	}
	return false
}

// oidcStart sends the browser to the provider.
func (u *UI) oidcStart(w http.ResponseWriter, r *http.Request) {
	oauth, _, err := u.oidc.discover(r.Context())
	if err != nil {
		u.log.Error("the OIDC login cannot start", "err", err)
		u.render(w, http.StatusBadGateway, "login", u.loginPage("The identity provider cannot be reached; try again later."))
		return
	}
	state, nonce := randomHex(), randomHex()
	http.SetCookie(w, &http.Cookie{Name: oidcCookie, Value: state + "." + nonce, Path: "/ui/login/oidc", MaxAge: 600,
		Secure: true, HttpOnly: true, SameSite: http.SameSiteLaxMode})
	http.Redirect(w, r, oauth.AuthCodeURL(state, oidc.Nonce(nonce)), http.StatusFound)
}

// errOIDCRefused is a provider's answer that does not log in.
var errOIDCRefused = errors.New("refused")

// oidcCallback takes the provider's answer: the state must be the
// login's, the ID token valid for this client with the login's nonce, and
// its verified address allowed. Failures count as failed logins.
func (u *UI) oidcCallback(w http.ResponseWriter, r *http.Request) {
	client := clientAddr(r)
	now := u.cfg.Now()
	if u.limited(client, now) {
		w.Header().Set("Retry-After", "60")
		u.render(w, http.StatusTooManyRequests, "login", u.loginPage("Too many failed logins; try again later."))
		return
	}
	email, err := u.oidcIdentity(r)
	http.SetCookie(w, &http.Cookie{Name: oidcCookie, Value: "", Path: "/ui/login/oidc", MaxAge: -1, Secure: true, HttpOnly: true, SameSite: http.SameSiteLaxMode})
	if err != nil {
		u.failed(client, now)
		u.log.Warn("a UI login through OIDC failed", "client", client, "err", err)
		u.render(w, http.StatusUnauthorized, "login", u.loginPage(loginFailed))
		return
	}
	u.startSession(w, client, now)
	u.log.Info("a UI session started through OIDC", "client", client, "email", email)
	// A page, not a redirect: the navigation to the tasks then starts on
	// this site, and the SameSite=Strict session cookie goes with it.
	u.render(w, http.StatusOK, "signedin", page{Title: "Logged in"})
}

func (u *UI) oidcIdentity(r *http.Request) (string, error) {
	c, err := r.Cookie(oidcCookie)
	if err != nil {
		return "", fmt.Errorf("no login under way: %w", errOIDCRefused)
	}
	state, nonce, _ := strings.Cut(c.Value, ".")
	q := r.URL.Query()
	if state == "" || subtle.ConstantTimeCompare([]byte(q.Get("state")), []byte(state)) != 1 {
		return "", fmt.Errorf("state mismatch: %w", errOIDCRefused)
	}
	if e := q.Get("error"); e != "" {
		return "", fmt.Errorf("the provider answered %q: %w", e, errOIDCRefused)
	}
	oauth, verifier, err := u.oidc.discover(r.Context())
	if err != nil {
		return "", err
	}
	tok, err := oauth.Exchange(r.Context(), q.Get("code"))
	if err != nil {
		return "", fmt.Errorf("exchange the code: %w", err)
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return "", fmt.Errorf("no id_token: %w", errOIDCRefused)
	}
	idt, err := verifier.Verify(r.Context(), raw)
	if err != nil {
		return "", fmt.Errorf("verify the ID token: %w", err)
	}
	if subtle.ConstantTimeCompare([]byte(idt.Nonce), []byte(nonce)) != 1 {
		return "", fmt.Errorf("nonce mismatch: %w", errOIDCRefused)
	}
	var claims struct {
		Email    string `json:"email"`
		Verified bool   `json:"email_verified"`
	}
	if err := idt.Claims(&claims); err != nil {
		return "", fmt.Errorf("read the ID token: %w", err)
	}
	if !claims.Verified || !u.oidc.allowed(claims.Email) {
		return "", fmt.Errorf("%q (verified %t) is not allowed: %w", claims.Email, claims.Verified, errOIDCRefused)
	}
	return claims.Email, nil
}
