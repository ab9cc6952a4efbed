package egress

import (
	"net/netip"
	"strings"
	"testing"
)

func TestParseRule(t *testing.T) {
	for _, tc := range []struct {
		entry, host string
		port        int
		literal     bool
	}{
		{"github.com", "github.com", 0, false},
		{"GitHub.COM.", "github.com", 0, false},
		{"*.githubusercontent.com", "*.githubusercontent.com", 0, false},
		{"pypi.org:443", "pypi.org", 443, false},
		{"127.0.0.1:8080", "127.0.0.1", 8080, true},
		{"[::1]:8080", "::1", 8080, true},
		{"::1", "::1", 0, true},
		{"[::1]", "::1", 0, true},
		{"::ffff:10.0.0.1", "10.0.0.1", 0, true},
		{"*", "*", 0, false},
		{"*:443", "*", 443, false},
		{"under_score.example", "under_score.example", 0, false},
	} {
		t.Run(tc.entry, func(t *testing.T) {
			r, err := ParseRule(tc.entry)
			if err != nil {
				t.Fatal(err)
			}
			if r.Host != tc.host || r.Port != tc.port || r.Literal() != tc.literal {
				t.Errorf("ParseRule(%q) = host %q port %d literal %v, want %q %d %v", tc.entry, r.Host, r.Port, r.Literal(), tc.host, tc.port, tc.literal)
			}
		})
	}
}

func TestParseRuleRefuses(t *testing.T) {
	for _, tc := range []struct{ entry, want string }{
		{"", "empty entry"},
		{"https://github.com", "not a URL"},
		{"github.com/foo", "not a URL"},
		{"user@github.com", "not a URL"},
		{"github.com:0", "port"},
		{"github.com:99999", "port"},
		{"github.com:https", "port"},
		{"git*hub.com", "wildcard"},
		{"*.*.com", "wildcard"},
		{"a..b", "empty label"},
		{"exa mple.com", "not a letter"},
		{"fe80::1%eth0", "zone"},
		{"1:2:3", "IPv6"},
		{"bücher.de", "xn--"},
	} {
		t.Run(tc.entry, func(t *testing.T) {
			_, err := ParseRule(tc.entry)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ParseRule(%q) = %v, want an error saying %q", tc.entry, err, tc.want)
			}
		})
	}
}

func mustRule(t *testing.T, entry string, scope ...[]string) Rule {
	t.Helper()
	r, err := ParseRule(entry)
	if err != nil {
		t.Fatal(err)
	}
	if len(scope) > 0 {
		r.Channels = scope[0]
	}
	if len(scope) > 1 {
		r.Pieces = scope[1]
	}
	r.Name = entry
	return r
}

func TestDecide(t *testing.T) {
	p := Policy{
		Allow: []Rule{
			mustRule(t, "github.com"),
			mustRule(t, "*.githubusercontent.com"),
			mustRule(t, "pypi.org:443"),
			mustRule(t, "127.0.0.1:8080"),
			mustRule(t, "internal.example", []string{"slack:C1"}),
			mustRule(t, "build.example", nil, []string{"build"}),
		},
		Deny: []Rule{mustRule(t, "evil.github.com"), mustRule(t, "github.com:22")},
	}
	job := Job{ID: 1, Channel: "slack:C2", Piece: "chat"}
	for _, tc := range []struct {
		target string
		job    Job
		allow  bool
		rule   string
	}{
		{"github.com:443", job, true, "github.com"},
		{"GITHUB.com.:443", job, true, "github.com"},
		{"github.com:22", job, false, "github.com:22"},
		{"evil.github.com:443", job, false, "evil.github.com"},
		{"api.github.com:443", job, false, "egress.default"},
		{"raw.githubusercontent.com:443", job, true, "*.githubusercontent.com"},
		{"a.b.githubusercontent.com:443", job, true, "*.githubusercontent.com"},
		{"githubusercontent.com:443", job, false, "egress.default"},
		{"xgithubusercontent.com:443", job, false, "egress.default"},
		{"pypi.org:443", job, true, "pypi.org:443"},
		{"pypi.org:80", job, false, "egress.default"},
		{"127.0.0.1:8080", job, true, "127.0.0.1:8080"},
		{"127.0.0.1:8081", job, false, "egress.default"},
		{"[::ffff:127.0.0.1]:8080", job, true, "127.0.0.1:8080"},
		{"internal.example:443", job, false, "egress.default"},
		{"internal.example:443", Job{Channel: "slack:C1"}, true, "internal.example"},
		{"build.example:443", job, false, "egress.default"},
		{"build.example:443", Job{Piece: "build"}, true, "build.example"},
	} {
		t.Run(tc.target, func(t *testing.T) {
			tg, err := parseTarget(tc.target, 0)
			if err != nil {
				t.Fatal(err)
			}
			d := p.decide(tg, tc.job)
			if d.allow != tc.allow || d.rule != tc.rule || d.ask {
				t.Errorf("decide(%s) = %+v, want allow %v by %q", tc.target, d, tc.allow, tc.rule)
			}
		})
	}
	p.Ask = true
	tg, _ := parseTarget("example.com:443", 0)
	if d := p.decide(tg, job); !d.ask || d.allow {
		t.Errorf("with Ask, an unlisted host: %+v, want ask", d)
	}
	tg, _ = parseTarget("evil.github.com:443", 0)
	if d := p.decide(tg, job); d.ask || d.allow {
		t.Errorf("with Ask, a denied host: %+v, want deny", d)
	}
}

func TestSpecial(t *testing.T) {
	for _, tc := range []struct {
		addr    string
		special bool
	}{
		{"127.0.0.1", true}, {"127.1.2.3", true}, {"::1", true}, {"::ffff:127.0.0.1", true},
		{"10.1.2.3", true}, {"172.16.0.1", true}, {"192.168.1.1", true}, {"fd00::1", true},
		{"169.254.169.254", true}, {"fe80::1", true}, {"0.0.0.0", true}, {"::", true},
		{"224.0.0.1", true}, {"ff02::1", true}, {"100.64.0.1", true}, {"255.255.255.255", true},
		{"64:ff9b::7f00:1", true}, {"2002:7f00:1::", true},
		{"8.8.8.8", false}, {"140.82.112.3", false}, {"2606:4700::1111", false}, {"172.32.0.1", false},
	} {
		if got := Special(netip.MustParseAddr(tc.addr)); got != tc.special {
			t.Errorf("Special(%s) = %v, want %v", tc.addr, got, tc.special)
		}
	}
}
