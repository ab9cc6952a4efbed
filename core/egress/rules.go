package egress

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// Rule is one allow or deny entry of the policy: a host pattern, an
// optional port, and the channels and pieces it is limited to.
type Rule struct {
	// Host is a lower-case host name ("github.com"), a wildcard of names
	// below a domain ("*.githubusercontent.com": any name ending in
	// ".githubusercontent.com", not the domain itself), "*" (any host), or
	// a literal IP address ("127.0.0.1", "::1"). Only a rule that names a
	// literal IP lets a connection reach a loopback, private or otherwise
	// non-public address (see Special).
	Host string
	// Port is the only port the rule covers; 0: every port.
	Port int
	// Channels and Pieces, when not empty, limit the rule to jobs of these
	// platform-qualified channels ("slack:C123") and of these pieces.
	Channels []string
	Pieces   []string
	// Name is how people are told of the rule ("egress.allow[2]").
	Name string

	ip netip.Addr // Host as an address, when it is a literal IP
}

// ParseRule parses an entry as the configuration writes it: a host
// pattern with an optional port ("github.com", "*.githubusercontent.com",
// "pypi.org:443", "127.0.0.1:8080", "[::1]:8080", "::1"). The error says
// what to write instead.
func ParseRule(entry string) (Rule, error) {
	s := strings.TrimSpace(entry)
	if s == "" {
		return Rule{}, errors.New("empty entry: write a host such as github.com, *.githubusercontent.com or pypi.org:443")
	}
	if strings.Contains(s, "://") || strings.ContainsAny(s, "/?#@") {
		return Rule{}, fmt.Errorf("%q is not a host: write the host and an optional port (github.com, pypi.org:443), not a URL or a path", entry)
	}
	host, port := s, 0
	if h, p, err := net.SplitHostPort(s); err == nil {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return Rule{}, fmt.Errorf("%q: port %q must be a number from 1 to 65535", entry, p)
		}
		host, port = h, n
	} else if strings.HasPrefix(s, "[") {
		host = strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")
	}
	r := Rule{Port: port}
	if ip, err := netip.ParseAddr(host); err == nil {
		if ip.Zone() != "" {
			return Rule{}, fmt.Errorf("%q: an address with a zone (%%%s) cannot be reached through the proxy", entry, ip.Zone())
		}
		r.ip = ip.Unmap()
		r.Host = r.ip.String()
		return r, nil
	}
	if strings.Count(host, ":") > 0 {
		return Rule{}, fmt.Errorf("%q is neither host:port nor an IP address (write an IPv6 address with a port as [::1]:8080)", entry)
	}
	name := strings.TrimSuffix(strings.ToLower(host), ".")
	if name == "*" {
		r.Host = "*"
		return r, nil
	}
	bare := strings.TrimPrefix(name, "*.")
	if err := checkName(bare); err != nil {
		return Rule{}, fmt.Errorf("%q: %w", entry, err)
	}
	r.Host = name
	return r, nil
}

// checkName reports what makes name no host name: a wildcard anywhere but
// in front, an empty label, a character other than letters, digits, - and _.
func checkName(name string) error {
	if name == "" || len(name) > 253 {
		return errors.New("want a host name such as github.com")
	}
	for label := range strings.SplitSeq(name, ".") {
		if label == "" || len(label) > 63 {
			return errors.New("a host name has no empty label and none longer than 63 characters")
		}
		if strings.Contains(label, "*") {
			return errors.New("a wildcard is written only in front, as *.example.com")
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return fmt.Errorf("%q is not a letter, digit, - or _ (write an international name in its xn-- form)", c)
			}
		}
	}
	return nil
}

// String writes the rule back as an entry.
func (r Rule) String() string {
	h := r.Host
	if r.Port == 0 {
		return h
	}
	return net.JoinHostPort(h, strconv.Itoa(r.Port))
}

// Literal reports whether the rule names a literal IP address.
func (r Rule) Literal() bool { return r.ip.IsValid() }

// inScope reports whether the rule applies to job.
func (r Rule) inScope(job Job) bool {
	if len(r.Channels) > 0 && !slices.Contains(r.Channels, job.Channel) {
		return false
	}
	return len(r.Pieces) == 0 || slices.Contains(r.Pieces, job.Piece)
}

// matches reports whether the rule covers t for job.
func (r Rule) matches(t target, job Job) bool {
	if r.Port != 0 && r.Port != t.port {
		return false
	}
	if !r.inScope(job) {
		return false
	}
	switch {
	case r.Host == "*":
		return true
	case r.ip.IsValid():
		return t.ip == r.ip
	case t.ip.IsValid():
		return false // a name never covers an address written as such
	case strings.HasPrefix(r.Host, "*."):
		return strings.HasSuffix(t.host, r.Host[1:])
	}
	return t.host == r.Host
}

// target is where a client asks to go: a host name or literal address,
// and a port.
type target struct {
	host string     // lower case, no trailing dot; an address in its canonical form
	ip   netip.Addr // the host when it is a literal address
	port int
}

func (t target) String() string { return net.JoinHostPort(t.host, strconv.Itoa(t.port)) }

// parseTarget reads host:port as a request names it (an authority:
// "example.com:443", "[::1]:80"); defPort is used when it has none.
func parseTarget(hostport string, defPort int) (target, error) {
	host, portStr, err := net.SplitHostPort(hostport)
	if err != nil {
		if defPort == 0 {
			return target{}, fmt.Errorf("%q: want host:port", hostport)
		}
		host, portStr = strings.TrimSuffix(strings.TrimPrefix(hostport, "["), "]"), strconv.Itoa(defPort)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 1 || port > 65535 {
		return target{}, fmt.Errorf("%q: bad port", hostport)
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		if ip.Zone() != "" {
			return target{}, fmt.Errorf("%q: an address with a zone", hostport)
		}
		ip = ip.Unmap()
		return target{host: ip.String(), ip: ip, port: port}, nil
	}
	name := strings.TrimSuffix(strings.ToLower(host), ".")
	if err := checkName(name); err != nil {
		return target{}, fmt.Errorf("%q: %w", hostport, err)
	}
	return target{host: name, port: port}, nil
}

// Policy is the configured rules: deny entries first (any that matches
// refuses), then allow entries, then the default.
type Policy struct {
	Allow, Deny []Rule
	// Ask, when true, makes a connection no rule covers a question to a
	// person (Asker); else it is refused.
	Ask bool
}

// Outcomes of a connection, as the audit, events and metrics name them.
const (
	Allowed = "allowed" // through, by a rule, a stored rule or a person's approval
	Denied  = "denied"  // refused: a rule, the default, an address, a cap, a person
	Asked   = "asked"   // refused for now: a person was asked and has not decided
)

// decision is what the policy says of a target before its addresses are
// known: the outcome it leads to and the rule that said so.
type decision struct {
	allow bool // false with ask: ask a person
	ask   bool
	rule  string
}

func (p *Policy) decide(t target, job Job) decision {
	for _, r := range p.Deny {
		if r.matches(t, job) {
			return decision{rule: r.Name}
		}
	}
	for _, r := range p.Allow {
		if r.matches(t, job) {
			return decision{allow: true, rule: r.Name}
		}
	}
	if p.Ask {
		return decision{ask: true, rule: "egress.default"}
	}
	return decision{rule: "egress.default"}
}

// literal reports whether an allow rule in scope for job names ip
// itself, at t's port: what lets a connection reach a special address.
// When the connection is to be asked about (ask), a rule naming ip at any
// port will do: the person asked decides on the port. Two rules never
// combine into more than each allows: "localhost" and "127.0.0.1:8080"
// reach 127.0.0.1 at port 8080 only.
func (p *Policy) literal(ip netip.Addr, t target, job Job, ask bool) bool {
	for _, r := range p.Allow {
		if r.ip.IsValid() && r.ip == ip && (ask || r.Port == 0 || r.Port == t.port) && r.inScope(job) {
			return true
		}
	}
	return false
}

// specialPrefixes are the ranges besides what netip's predicates name
// (loopback, private, link-local, multicast, unspecified) where no public
// service lives: this network, shared address space (carrier NAT),
// protocol assignments, benchmarking, reserved, broadcast, and the IPv6
// prefixes that embed IPv4 addresses (NAT64, 6to4, Teredo) or are
// documentation, discard or deprecated site-local.
var specialPrefixes = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("192.0.2.0/24"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("198.51.100.0/24"),
	netip.MustParsePrefix("203.0.113.0/24"),
	netip.MustParsePrefix("240.0.0.0/4"),
	netip.MustParsePrefix("64:ff9b::/96"),
	netip.MustParsePrefix("64:ff9b:1::/48"),
	netip.MustParsePrefix("100::/64"),
	netip.MustParsePrefix("2001::/32"),
	netip.MustParsePrefix("2001:db8::/32"),
	netip.MustParsePrefix("2002::/16"),
	netip.MustParsePrefix("fec0::/10"),
}

// Special reports whether ip is an address where no public service lives:
// loopback, private (RFC 1918, unique local), link-local, multicast,
// unspecified, or another reserved range (specialPrefixes). An IPv4
// address written in IPv6 (::ffff:127.0.0.1) counts as itself. The proxy
// reaches such an address only when an allow rule names it literally.
func Special(ip netip.Addr) bool {
	ip = ip.Unmap()
	if !ip.IsValid() || ip.IsLoopback() || ip.IsPrivate() || ip.IsUnspecified() || ip.IsMulticast() ||
		ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() || ip.IsInterfaceLocalMulticast() {
		return true
	}
	if ip.Is4() && ip == netip.AddrFrom4([4]byte{255, 255, 255, 255}) {
		return true
	}
	for _, p := range specialPrefixes {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}
