package core

import (
	"testing"
	"time"
)

// TestConnectionRoundTrip: what ParseConnection reads back of an event's
// detail is what String wrote, whatever the rule and the reason say.
func TestConnectionRoundTrip(t *testing.T) {
	for _, c := range []Connection{
		{Outcome: "allowed", Method: "GET", Host: "pypi.org", Port: 443, Rule: "egress.allow[0]", Addr: "151.101.0.223:443", BytesUp: 712, BytesDown: 38211, Duration: 420 * time.Millisecond},
		{Outcome: "allowed", Method: "CONNECT", Host: "::1", Port: 8080, Rule: "approved for this job", Addr: "[::1]:8080", BytesUp: 1, Duration: time.Second,
			Reason: "idle for 5m0s, 9 B up, 9 B down, as (it) said: no"},
		{Outcome: "denied", Method: "POST", Host: "127.0.0.1", Port: 6379, Rule: "egress.default", Reason: "no egress.allow entry covers 127.0.0.1:6379, 5 B up, 5 B down, x"},
		{Outcome: "asked", Method: "CONNECT", Host: "example.com", Port: 443, Rule: "egress.default"},
		{Outcome: "denied", Reason: "malformed request: x"},
	} {
		d := c.String()
		got, ok := ParseConnection(d)
		want := Connection{Outcome: c.Outcome, Method: c.Method, Host: c.Host, Port: c.Port, BytesUp: c.BytesUp, BytesDown: c.BytesDown}
		if !ok || got != want {
			t.Errorf("ParseConnection(%q) = %+v, %v; want %+v", d, got, ok, want)
		}
	}
	if got := (Connection{Outcome: "allowed", Method: "GET", Host: "pypi.org", Port: 443, Rule: "egress.allow[0]", Addr: "151.101.0.223:443", BytesUp: 712, BytesDown: 38211, Duration: 420 * time.Millisecond}).String(); got != "allowed GET pypi.org:443 (egress.allow[0]) via 151.101.0.223:443, 712 B up, 38211 B down, 420ms" {
		t.Errorf("String = %q", got)
	}
	for _, d := range []string{"", "movement answer", "allowed", "allowed GET nohostport"} {
		if c, ok := ParseConnection(d); ok {
			t.Errorf("ParseConnection(%q) = %+v, want not a connection", d, c)
		}
	}
}
