package core

import (
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// EventEgress is the kind of the job event that records one connection
// through the egress proxy: its Detail is a Connection as String writes
// it, and ParseConnection reads it back.
const EventEgress = "egress"

// Connection is one connection of a job through the egress proxy, as its
// job event records it.
type Connection struct {
	Outcome string // allowed, denied or asked
	// Method is CONNECT or the HTTP method of a forwarded request; with
	// Host, "" when no request could be read.
	Method string
	Host   string // a name or a literal address, as the client named it
	Port   int
	Rule   string // what decided: a config key, a person, a stored rule
	Addr   string // the address connected to; "" when none was
	// BytesUp went to the host, BytesDown came from it.
	BytesUp, BytesDown int64
	Duration           time.Duration
	Reason             string // why it was refused or ended early; "" when it was not
}

// String is the event's detail: the outcome first, then the request,
// what decided, the address, and for a connection let through its bytes
// and duration ("allowed GET pypi.org:443 (egress.allow[0]) via
// 151.101.0.223:443, 712 B up, 38211 B down, 420ms"), then the reason.
func (c Connection) String() string {
	var b strings.Builder
	if c.Host == "" {
		fmt.Fprintf(&b, "%s request", c.Outcome) // none could be read
	} else {
		fmt.Fprintf(&b, "%s %s %s", c.Outcome, c.Method, net.JoinHostPort(c.Host, strconv.Itoa(c.Port)))
	}
	if c.Rule != "" {
		fmt.Fprintf(&b, " (%s)", c.Rule)
	}
	if c.Addr != "" {
		fmt.Fprintf(&b, " via %s", c.Addr)
	}
	if c.Outcome == "allowed" {
		fmt.Fprintf(&b, ", %d B up, %d B down, %s", c.BytesUp, c.BytesDown, c.Duration.Round(time.Millisecond))
	}
	if c.Reason != "" {
		b.WriteString(": " + c.Reason)
	}
	return b.String()
}

// connectionBytes finds the bytes String writes.
var connectionBytes = regexp.MustCompile(`, (\d+) B up, (\d+) B down, `)

// ParseConnection reads back from an event's detail what String wrote of
// the outcome, the method, the host and port and the bytes (the rule, the
// address and the reason are for people to read, and are not read back).
// ok is false when detail is not a connection's.
func ParseConnection(detail string) (c Connection, ok bool) {
	outcome, rest, _ := strings.Cut(detail, " ")
	if outcome != "allowed" && outcome != "denied" && outcome != "asked" {
		return Connection{}, false
	}
	c.Outcome = outcome
	if rest == "request" || strings.HasPrefix(rest, "request ") || strings.HasPrefix(rest, "request:") {
		return c, true
	}
	fields := strings.SplitN(rest, " ", 3)
	if len(fields) < 2 {
		return Connection{}, false
	}
	host, port, err := net.SplitHostPort(strings.TrimSuffix(fields[1], ":"))
	if err != nil {
		return Connection{}, false
	}
	if c.Port, err = strconv.Atoi(port); err != nil {
		return Connection{}, false
	}
	c.Method, c.Host = fields[0], host
	if len(fields) == 3 && outcome == "allowed" {
		if m := connectionBytes.FindStringSubmatch(fields[2]); m != nil {
			c.BytesUp, _ = strconv.ParseInt(m[1], 10, 64)
			c.BytesDown, _ = strconv.ParseInt(m[2], 10, 64)
		}
	}
	return c, true
}

// HostPort is the connection's host:port, an IPv6 address in brackets.
func (c Connection) HostPort() string {
	if c.Host == "" {
		return ""
	}
	return net.JoinHostPort(c.Host, strconv.Itoa(c.Port))
}
