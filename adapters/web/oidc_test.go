package web_test

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/coreos/go-oidc/v3/oidc/oidctest"

	"github.com/baton-bot/baton/adapters/web"
)

// fakeIdP is an OpenID Connect provider whose token endpoint hands out, for
// a code, the ID token claims the test gave that code.
type fakeIdP struct {
	*httptest.Server
	key *rsa.PrivateKey
	mu  sync.Mutex
	ids map[string]string // code → claims JSON
}

func newIdP(t *testing.T) *fakeIdP {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	idp := &fakeIdP{key: key, ids: map[string]string{}}
	disc := &oidctest.Server{PublicKeys: []oidctest.PublicKey{{PublicKey: key.Public(), KeyID: "k1", Algorithm: oidc.RS256}}}
	mux := http.NewServeMux()
	mux.Handle("/", disc)
	mux.HandleFunc("POST /token", func(w http.ResponseWriter, r *http.Request) {
		idp.mu.Lock()
		claims, ok := idp.ids[r.PostFormValue("code")]
		idp.mu.Unlock()
		if !ok {
			http.Error(w, `{"error":"invalid_grant"}`, http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"access_token": "a", "token_type": "Bearer", "expires_in": 60,
			"id_token": oidctest.SignIDToken(key, "k1", oidc.RS256, claims)})
	})
	idp.Server = httptest.NewServer(mux)
	t.Cleanup(idp.Close)
	disc.SetIssuer(idp.URL)
	return idp
}

// TestOIDCLogin: an allowed, verified address logs in through the provider;
// a wrong state, a replayed nonce, an unverified or a foreign address do
// not, and are told no more than a wrong token is.
func TestOIDCLogin(t *testing.T) {
	idp := newIdP(t)
	ui, err := web.New(openStore(t), noService{}, web.Config{Token: "s3cret", OIDC: &web.OIDC{
		Issuer: idp.URL, ClientID: "baton", ClientSecret: "cs", RedirectURL: "http://baton.test/ui/login/oidc/callback",
		Allowed: []string{"ann@example.com", "@team.example"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(ui.Handler())
	defer srv.Close()
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	do := func(path, cookie string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest("GET", srv.URL+path, nil)
		if cookie != "" {
			req.Header.Set("Cookie", cookie)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	cookieOf := func(resp *http.Response, name string) string {
		for _, c := range resp.Cookies() {
			if c.Name == name && c.Value != "" {
				return c.Name + "=" + c.Value
			}
		}
		return ""
	}
	n := 0
	// login starts a login, lets the provider answer claims (with the
	// login's nonce unless nonce is set) and returns the callback's answer.
	login := func(email string, verified bool, nonce string, state string) *http.Response {
		t.Helper()
		start := do("/ui/login/oidc", "")
		to, err := url.Parse(start.Header.Get("Location"))
		if start.StatusCode != http.StatusFound || err != nil || !strings.HasPrefix(to.String(), idp.URL+"/auth") {
			t.Fatalf("the login start = %d to %q", start.StatusCode, start.Header.Get("Location"))
		}
		if nonce == "" {
			nonce = to.Query().Get("nonce")
		}
		if state == "" {
			state = to.Query().Get("state")
		}
		n++
		code := fmt.Sprintf("code%d", n)
		idp.mu.Lock()
		idp.ids[code] = fmt.Sprintf(`{"iss":%q,"aud":"baton","sub":"u%d","email":%q,"email_verified":%t,"nonce":%q,"iat":%d,"exp":%d}`,
			idp.URL, n, email, verified, nonce, time.Now().Unix(), time.Now().Add(time.Minute).Unix())
		idp.mu.Unlock()
		return do("/ui/login/oidc/callback?code="+code+"&state="+url.QueryEscape(state), cookieOf(start, "baton_ui_oidc"))
	}
	for _, tc := range []struct {
		name, email  string
		verified     bool
		nonce, state string
		want         int
	}{
		{"an allowed address", "ann@example.com", true, "", "", http.StatusOK},
		{"an allowed domain", "Bob@Team.Example", true, "", "", http.StatusOK},
		{"an unverified address", "ann@example.com", false, "", "", http.StatusUnauthorized},
		{"another address", "eve@example.com", true, "", "", http.StatusUnauthorized},
		{"another nonce", "ann@example.com", true, "stale", "", http.StatusUnauthorized},
		{"another state", "ann@example.com", true, "", "forged", http.StatusUnauthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := login(tc.email, tc.verified, tc.nonce, tc.state)
			session := cookieOf(resp, "baton_ui")
			if resp.StatusCode != tc.want || (session != "") != (tc.want == http.StatusOK) {
				t.Fatalf("callback = %d, session %t; want %d", resp.StatusCode, session != "", tc.want)
			}
			if session != "" {
				if got := do("/ui/tasks", session); got.StatusCode != http.StatusOK {
					t.Errorf("the tasks with the OIDC session = %d", got.StatusCode)
				}
			}
		})
	}
	// Four failures so far: the fifth is the last one answered.
	if resp := login("eve@example.com", true, "", ""); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("fifth failure = %d", resp.StatusCode)
	}
	if resp := login("ann@example.com", true, "", ""); resp.StatusCode != http.StatusTooManyRequests {
		t.Errorf("a login after five failures = %d, want 429", resp.StatusCode)
	}
}
