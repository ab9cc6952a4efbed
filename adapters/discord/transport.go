package discord

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/bwmarrin/discordgo"
)

// defaultBase is where discordgo sends every REST call; its endpoint
// variables are fixed when the package loads, so discord.api_url is honoured
// by rewriting requests in the session's HTTP transport instead.
var defaultBase = discordgo.EndpointAPI

// rewrite sends the requests aimed at defaultBase to base, keeping the path
// below the base and the query; every other request (attachment downloads
// from the CDN) goes out unchanged. It is safe for concurrent use.
type rewrite struct {
	base string // ends with "/"
	next http.RoundTripper
}

// RoundTrip implements http.RoundTripper.
func (t rewrite) RoundTrip(r *http.Request) (*http.Response, error) {
	prefix := strings.TrimSuffix(defaultBase, "/")
	u := r.URL
	origin := u.Scheme + "://" + u.Host
	path := u.EscapedPath()
	if !strings.HasPrefix(origin+path, prefix) {
		return t.next.RoundTrip(r)
	}
	rest := strings.TrimPrefix(strings.TrimPrefix(origin+path, prefix), "/")
	to, err := url.Parse(t.base + rest)
	if err != nil {
		if r.Body != nil {
			r.Body.Close()
		}
		return nil, fmt.Errorf("discord.api_url: rewrite %s: %w", path, err)
	}
	to.RawQuery = u.RawQuery
	out := r.Clone(r.Context())
	out.URL = to
	out.Host = to.Host
	return t.next.RoundTrip(out)
}

// client returns the session's HTTP client: requests for Discord's API go
// to apiURL (unchanged when it is empty or Discord's own base).
func client(apiURL string, next http.RoundTripper) (*http.Client, error) {
	if next == nil {
		next = http.DefaultTransport
	}
	c := &http.Client{Timeout: requestTimeout, Transport: next}
	if apiURL == "" || apiURL == defaultBase {
		return c, nil
	}
	u, err := url.Parse(apiURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("discord.api_url %q: not an http(s) URL", apiURL)
	}
	base := apiURL
	if !strings.HasSuffix(base, "/") {
		base += "/"
	}
	c.Transport = rewrite{base: base, next: next}
	return c, nil
}
