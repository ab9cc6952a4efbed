package egress

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/baton-bot/baton/core/catalog"
)

// resolver is a fake DNS: names to addresses, counting lookups.
type resolver struct {
	mu      sync.Mutex
	answers map[string][]netip.Addr
	lookups map[string]int
}

func (r *resolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lookups[host]++
	a, ok := r.answers[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	return a, nil
}

func (r *resolver) count(host string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lookups[host]
}

func newResolver(answers map[string]string) *resolver {
	r := &resolver{answers: map[string][]netip.Addr{}, lookups: map[string]int{}}
	for h, a := range answers {
		for s := range strings.SplitSeq(a, ",") {
			r.answers[h] = append(r.answers[h], netip.MustParseAddr(s))
		}
	}
	return r
}

// audits collects a session's records.
type audits struct {
	mu  sync.Mutex
	got []Record
}

func (a *audits) add(r Record) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.got = append(a.got, r)
}

func (a *audits) all() []Record {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]Record(nil), a.got...)
}

// wait returns the records once there are at least n.
func (a *audits) wait(t *testing.T, n int) []Record {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if got := a.all(); len(got) >= n {
			return got
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("%d audit records, want %d: %+v", len(a.all()), n, a.all())
	return nil
}

// rig is a proxy with one session served on a TCP listener.
type rig struct {
	p     *Proxy
	s     *Session
	addr  string // the session's listener
	audit *audits
}

func newRig(t *testing.T, cfg Config, asker Asker, allow ...string) *rig {
	t.Helper()
	for _, e := range allow {
		cfg.Policy.Allow = append(cfg.Policy.Allow, mustRule(t, e))
	}
	if cfg.Resolver == nil {
		cfg.Resolver = newResolver(nil)
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	a := &audits{}
	s := p.Session(SessionConfig{Job: Job{ID: 7, Channel: "slack:C1", Piece: "chat"}, Asker: asker, Audit: a.add})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(ln)
	t.Cleanup(func() { s.Close() })
	return &rig{p: p, s: s, addr: ln.Addr().String(), audit: a}
}

// client is an HTTP client whose every request goes through the rig.
func (r *rig) client() *http.Client {
	u := &url.URL{Scheme: "http", Host: r.addr}
	return &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(u), DisableKeepAlives: true}, Timeout: 30 * time.Second}
}

// nonceServer answers every request with its nonce and the request's
// Proxy-Authorization header, if any.
func nonceServer(t *testing.T, nonce string) (*httptest.Server, string) {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s proxy-auth=%q host=%s", nonce, r.Header.Get("Proxy-Authorization"), r.Host)
	}))
	t.Cleanup(srv.Close)
	return srv, strings.TrimPrefix(srv.URL, "http://")
}

// connect sends a CONNECT for target over a new connection to the rig and
// returns the status line and the connection.
func (r *rig) connect(t *testing.T, target string) (string, net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", r.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\nProxy-Authorization: Basic Zm9vOmJhcg==\r\n\r\n", target, target)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		t.Fatalf("CONNECT %s: %v", target, err)
	}
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		return resp.Status + " " + string(body), c, br
	}
	return resp.Status, c, br
}

func TestConnectAllowed(t *testing.T) {
	_, hostport := nonceServer(t, "nonce-1")
	r := newRig(t, Config{}, nil, hostport)
	status, c, br := r.connect(t, hostport)
	if !strings.HasPrefix(status, "200") {
		t.Fatalf("CONNECT to an allowed literal address: %s", status)
	}
	fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", hostport)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if !strings.HasPrefix(string(body), "nonce-1") {
		t.Errorf("through the tunnel: %q", body)
	}
	c.Close()
	rec := r.audit.wait(t, 1)[0]
	if rec.Outcome != Allowed || rec.Method != "CONNECT" || rec.Host != "127.0.0.1" || rec.Addr != hostport ||
		rec.Rule != hostport || rec.BytesUp == 0 || rec.BytesDown == 0 || rec.Job.ID != 7 {
		t.Errorf("audit: %+v", rec)
	}
}

func TestForwardAllowed(t *testing.T) {
	_, hostport := nonceServer(t, "nonce-2")
	r := newRig(t, Config{}, nil, hostport)
	req, _ := http.NewRequest("GET", "http://"+hostport+"/x", nil)
	req.Header.Set("Proxy-Authorization", "Basic Zm9vOmJhcg==")
	resp, err := r.client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != `nonce-2 proxy-auth="" host=`+hostport {
		t.Errorf("forwarded: %d %q (Proxy-Authorization must not be forwarded)", resp.StatusCode, body)
	}
	rec := r.audit.wait(t, 1)[0]
	if rec.Outcome != Allowed || rec.Method != "GET" || rec.BytesDown == 0 || rec.BytesUp == 0 {
		t.Errorf("audit: %+v", rec)
	}
}

func TestRefusals(t *testing.T) {
	_, other := nonceServer(t, "other")
	_, otherPort, _ := net.SplitHostPort(other)
	res := newResolver(map[string]string{
		"allowed.test": "127.0.0.1",
		"mixed.test":   "127.0.0.1,10.0.0.1",
		"meta.test":    "169.254.169.254",
		"localhost":    "127.0.0.1,::1",
		"ports.test":   "93.184.215.14",
	})
	r := newRig(t, Config{Resolver: res, Policy: Policy{Deny: []Rule{mustRule(t, "bad.allowed.test")}}}, nil,
		"allowed.test", "mixed.test", "meta.test", "*.allowed.test", "localhost", "ports.test:443")
	for _, tc := range []struct {
		target, status, reason string
	}{
		{other, "403", "no egress.allow entry covers 127.0.0.1:" + otherPort},
		{"allowed.test:" + otherPort, "403", "allowed.test resolves to 127.0.0.1, a loopback, private or reserved address"},
		{"mixed.test:443", "403", "resolves to"},
		{"meta.test:80", "403", "resolves to 169.254.169.254"},
		{"localhost:6379", "403", "localhost resolves to 127.0.0.1"},
		{"bad.allowed.test:443", "403", "bad.allowed.test refuses"},
		{"unknown.test:443", "403", "no egress.allow entry"},
		{"nowhere.allowed.test:443", "502", "cannot resolve nowhere.allowed.test"},
		{"127.0.0.1", "400", "host:port"},
		{"[::1]:6379", "403", "no egress.allow entry"},
		{"ports.test:22", "403", "no egress.allow entry covers ports.test:22"},
	} {
		t.Run(tc.target, func(t *testing.T) {
			status, _, _ := r.connect(t, tc.target)
			if !strings.HasPrefix(status, tc.status) || !strings.Contains(status, tc.reason) {
				t.Errorf("CONNECT %s: %q, want %s saying %q", tc.target, status, tc.status, tc.reason)
			}
		})
	}
	for _, rec := range r.audit.wait(t, 11) {
		if rec.Outcome != Denied || rec.Reason == "" || rec.Addr != "" {
			t.Errorf("a refused connection audited as %+v", rec)
		}
	}
	if n := res.count("mixed.test"); n != 1 {
		t.Errorf("mixed.test looked up %d times, want once", n)
	}
}

// TestOneLookup: a name is resolved once per connection and the
// connection goes to the address checked, whatever a second answer would
// say (no DNS rebinding).
func TestOneLookup(t *testing.T) {
	_, hostport := nonceServer(t, "rebind")
	_, port, _ := net.SplitHostPort(hostport)
	res := newResolver(map[string]string{"svc.test": "127.0.0.1"})
	r := newRig(t, Config{Resolver: res}, nil, "svc.test", "127.0.0.1")
	resp, err := r.client().Get("http://svc.test:" + port + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.HasPrefix(string(body), "rebind") || !strings.Contains(string(body), "host=svc.test:"+port) {
		t.Errorf("through a name allowed, at a literal address allowed: %d %q", resp.StatusCode, body)
	}
	if n := res.count("svc.test"); n != 1 {
		t.Errorf("svc.test looked up %d times for one request, want 1", n)
	}
	if rec := r.audit.wait(t, 1)[0]; rec.Addr != hostport || rec.Host != "svc.test" {
		t.Errorf("audit: %+v", rec)
	}
}

// TestLiteralCoversItsPortOnly: an entry naming a loopback address at a
// port and an entry allowing a name that resolves to it do not combine
// into the address's other ports.
func TestLiteralCoversItsPortOnly(t *testing.T) {
	_, a := nonceServer(t, "port-a")
	_, b := nonceServer(t, "port-b")
	_, portA, _ := net.SplitHostPort(a)
	_, portB, _ := net.SplitHostPort(b)
	res := newResolver(map[string]string{"localhost": "127.0.0.1"})
	r := newRig(t, Config{Resolver: res}, nil, a, "localhost")
	if status, _, _ := r.connect(t, "localhost:"+portA); !strings.HasPrefix(status, "200") {
		t.Errorf("localhost at the port the literal entry names: %s", status)
	}
	if status, _, _ := r.connect(t, "localhost:"+portB); !strings.HasPrefix(status, "403") || !strings.Contains(status, "resolves to 127.0.0.1") {
		t.Errorf("localhost at another port: %s", status)
	}
}

func TestMalformed(t *testing.T) {
	r := newRig(t, Config{HeaderTimeout: 500 * time.Millisecond}, nil)
	for _, tc := range []struct{ name, send, status string }{
		{"long line", "GET http://x/" + strings.Repeat("a", MaxHeaderBytes+10) + " HTTP/1.1\r\n\r\n", "431"},
		{"long headers", "GET http://x/ HTTP/1.1\r\n" + strings.Repeat("X-A: "+strings.Repeat("b", 1000)+"\r\n", 100) + "\r\n", "431"},
		{"garbage", "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n", "400"},
		{"no version", "GET /\r\n\r\n", "400"},
		{"origin form", "GET / HTTP/1.1\r\nHost: x\r\n\r\n", "400"},
		{"https url", "GET https://x/ HTTP/1.1\r\nHost: x\r\n\r\n", "400"},
		{"silent", "GET http://x/ HTTP/1.1\r\n", "408"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("tcp", r.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			go io.WriteString(c, tc.send)
			c.SetReadDeadline(time.Now().Add(20 * time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatalf("no response: %v", err)
			}
			if !strings.HasPrefix(resp.Status, tc.status) || resp.Header.Get("X-Baton-Egress") != Denied {
				t.Errorf("%s: %s %v", tc.name, resp.Status, resp.Header)
			}
		})
	}
}

func TestCaps(t *testing.T) {
	t.Run("connections", func(t *testing.T) {
		_, hostport := nonceServer(t, "cap")
		r := newRig(t, Config{MaxConnections: 5}, nil, hostport)
		client := r.client()
		var ok, capped int
		for range 8 {
			resp, err := client.Get("http://" + hostport + "/")
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			switch {
			case resp.StatusCode == 200:
				ok++
			case resp.StatusCode == 429 && strings.Contains(string(body), "made 5 connections"):
				capped++
			default:
				t.Errorf("%d %q", resp.StatusCode, body)
			}
		}
		if ok != 5 || capped != 3 {
			t.Errorf("%d through, %d capped; want 5 and 3", ok, capped)
		}
	})
	t.Run("open at once", func(t *testing.T) {
		r := newRig(t, Config{MaxOpen: 3, HeaderTimeout: 20 * time.Second}, nil)
		var held []net.Conn
		for range 3 {
			c, err := net.Dial("tcp", r.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			held = append(held, c)
		}
		for deadline := time.Now().Add(20 * time.Second); r.s.openCount() < 3 && time.Now().Before(deadline); {
			time.Sleep(5 * time.Millisecond)
		}
		c, err := net.Dial("tcp", r.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetReadDeadline(time.Now().Add(20 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != 429 {
			t.Fatalf("a fourth connection: %v %v", resp, err)
		}
		body, _ := io.ReadAll(resp.Body)
		if !strings.Contains(string(body), "already holds 3 connections") {
			t.Errorf("body %q", body)
		}
	})
	t.Run("bytes", func(t *testing.T) {
		big := strings.Repeat("x", 1<<20)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, big) }))
		defer srv.Close()
		hostport := strings.TrimPrefix(srv.URL, "http://")
		r := newRig(t, Config{MaxBytes: 100 << 10}, nil, hostport)
		resp, err := r.client().Get(srv.URL)
		if err == nil {
			body, rerr := io.ReadAll(resp.Body)
			resp.Body.Close()
			if rerr == nil && len(body) == len(big) {
				t.Fatalf("1 MiB passed a 100 KiB cap")
			}
		}
		rec := r.audit.wait(t, 1)[0]
		if !strings.Contains(rec.Reason, "its cap") || rec.BytesDown > 200<<10 {
			t.Errorf("audit: %+v", rec)
		}
		status, _, _ := r.connect(t, hostport)
		if !strings.HasPrefix(status, "429") {
			t.Errorf("after the cap, CONNECT: %s", status)
		}
	})
}

// TestSilentUpstream: a host that accepts and never answers is cut after
// the idle timeout, a tunnel and a forwarded request alike.
func TestSilentUpstream(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(io.Discard, c); c.Close() }()
		}
	}()
	hostport := ln.Addr().String()
	r := newRig(t, Config{IdleTimeout: 300 * time.Millisecond}, nil, hostport)
	resp, err := r.client().Get("http://" + hostport + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 504 && resp.StatusCode != 502 {
		t.Errorf("a silent host, forwarded: %d %q", resp.StatusCode, body)
	}
	status, c, br := r.connect(t, hostport)
	if !strings.HasPrefix(status, "200") {
		t.Fatal(status)
	}
	io.WriteString(c, "hello")
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
		t.Errorf("the tunnel to a silent host: %v, want it closed", err)
	}
	recs := r.audit.wait(t, 2)
	if !strings.Contains(recs[1].Reason, "idle for 300ms") {
		t.Errorf("audit: %+v", recs[1])
	}
}

// asker answers from a table and counts its questions.
type asker struct {
	answers map[string]Answer
	asked   atomic.Int64
}

func (a *asker) Ask(_ context.Context, q Question) (Answer, error) {
	a.asked.Add(1)
	if ans, ok := a.answers[q.HostPort()]; ok {
		return ans, nil
	}
	return Answer{}, errors.New("no answer")
}

func TestAsk(t *testing.T) {
	_, yes := nonceServer(t, "yes")
	_, later := nonceServer(t, "later")
	_, no := nonceServer(t, "no")
	a := &asker{answers: map[string]Answer{
		yes:   {Outcome: Allowed, Rule: "approved by slack:U1"},
		later: {Outcome: Asked},
		no:    {Outcome: Denied, Rule: "denied by slack:U1"},
	}}
	// An entry naming the address (at another port) lets it be asked
	// about: the addresses are loopback ones.
	r := newRig(t, Config{Policy: Policy{Ask: true}}, a, "127.0.0.1:1")
	for _, tc := range []struct{ target, status, outcome, rule string }{
		{yes, "200", Allowed, "approved by slack:U1"},
		{later, "403 Forbidden Baton egress proxy: reaching " + later + " needs a person's approval", Asked, "egress.default"},
		{no, "403 Forbidden Baton egress proxy: reaching " + no + " was denied", Denied, "denied by slack:U1"},
		{"[::1]:9", "403", Denied, "egress.default"}, // not asked: nothing to connect to
	} {
		i := len(r.audit.all())
		status, c, _ := r.connect(t, tc.target)
		if !strings.HasPrefix(status, tc.status) {
			t.Errorf("CONNECT %s: %q, want %q", tc.target, status, tc.status)
		}
		c.Close()
		r.audit.wait(t, i+1)
	}
	recs := r.audit.wait(t, 4)
	for i, want := range []struct{ outcome, rule string }{{Allowed, "approved by slack:U1"}, {Asked, "egress.default"}, {Denied, "denied by slack:U1"}, {Denied, "egress.default"}} {
		if recs[i].Outcome != want.outcome || recs[i].Rule != want.rule {
			t.Errorf("record %d: %+v, want %s by %s", i, recs[i], want.outcome, want.rule)
		}
	}
	if n := a.asked.Load(); n != 3 {
		t.Errorf("asked %d times, want 3", n)
	}
}

// TestUnixSocket: Open serves a Unix socket whose connections are the
// session's, and stops serving it once closed.
func TestUnixSocket(t *testing.T) {
	_, hostport := nonceServer(t, "unix")
	r := newRig(t, Config{}, nil, hostport)
	ep, err := r.s.Open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	sock := ep.Socket
	tr := &http.Transport{
		Proxy:       http.ProxyURL(&url.URL{Scheme: "http", Host: "bridge"}),
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return net.Dial("unix", sock) },
	}
	resp, err := (&http.Client{Transport: tr}).Get("http://" + hostport + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	tr.CloseIdleConnections()
	if !strings.HasPrefix(string(body), "unix") {
		t.Errorf("through the socket: %q", body)
	}
	ep.Close()
	if _, err := net.Dial("unix", sock); err == nil {
		t.Error("the socket still answers after stop")
	}
}

func readFile(p string) (string, error) {
	b, err := os.ReadFile(p)
	return string(b), err
}

// TestThousandConnections: a client that opens 1,000 connections at once
// gets MaxOpen of them served and the rest refused with 429 at once; the
// session serves again once they are gone.
func TestThousandConnections(t *testing.T) {
	_, hostport := nonceServer(t, "after")
	r := newRig(t, Config{MaxOpen: 16, HeaderTimeout: 20 * time.Second}, nil, hostport)
	var wg sync.WaitGroup
	var refused, other atomic.Int64
	conns := make(chan net.Conn, 1000)
	for range 1000 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.Dial("tcp", r.addr)
			if err != nil {
				other.Add(1)
				return
			}
			conns <- c
			c.SetReadDeadline(time.Now().Add(2 * time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			switch {
			case err == nil && resp.StatusCode == http.StatusTooManyRequests:
				refused.Add(1)
			case err != nil: // held open: one of the 16, silent until it times out
			default:
				other.Add(1)
			}
		}()
	}
	wg.Wait()
	close(conns)
	// Refused ones count while they are answered: fewer than 16 may have
	// been held, never more.
	// A busy machine may drop a dial or two from the listen queue.
	if n, o := refused.Load(), other.Load(); o > 100 || n+o < 1000-16 || n == 1000 {
		t.Errorf("%d refused with 429, %d other outcomes; want 984 to 999 refused", n, o)
	}
	for c := range conns {
		c.Close()
	}
	for deadline := time.Now().Add(20 * time.Second); r.s.openCount() > 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	resp, err := r.client().Get("http://" + hostport + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.HasPrefix(string(body), "after") {
		t.Errorf("after the flood: %d %q", resp.StatusCode, body)
	}
}

// TestRefusalsInLocale: what a refused client reads, and the audit's
// reason, are the catalogue's words in the proxy's locale: the English
// and the Japanese of each kind of refusal, never a text of the code.
func TestRefusalsInLocale(t *testing.T) {
	_, other := nonceServer(t, "other")
	res := newResolver(map[string]string{"localhost": "127.0.0.1"})
	for _, loc := range catalog.Locales {
		t.Run(loc, func(t *testing.T) {
			tx := catalog.Or(loc)
			r := newRig(t, Config{Resolver: res, Texts: tx, MaxConnections: 2}, nil, "localhost")
			for _, tc := range []struct{ send, want string }{
				{"CONNECT " + other + " HTTP/1.1\r\n\r\n", tx.Fill("egress.not_listed", "target", other)},
				{"CONNECT localhost:6379 HTTP/1.1\r\n\r\n", tx.Fill("egress.special_name", "host", "localhost", "addr", "127.0.0.1")},
				{"CONNECT nowhere HTTP/1.1\r\n\r\n", tx.Fill("egress.connect_target", "target", `"nowhere"`)},
				{"GET /x HTTP/1.1\r\nHost: x\r\n\r\n", tx.Fill("egress.not_absolute")},
				{"CONNECT " + other + " HTTP/1.1\r\n\r\n", tx.Fill("egress.max_connections", "n", "2")},
			} {
				c, err := net.Dial("tcp", r.addr)
				if err != nil {
					t.Fatal(err)
				}
				io.WriteString(c, tc.send)
				c.SetReadDeadline(time.Now().Add(20 * time.Second))
				resp, err := http.ReadResponse(bufio.NewReader(c), nil)
				if err != nil {
					t.Fatalf("%q: %v", tc.send, err)
				}
				body, _ := io.ReadAll(resp.Body)
				c.Close()
				if want := tx.Fill("egress.refusal", "reason", tc.want) + "\n"; string(body) != want {
					t.Errorf("%q answered %q, want %q", tc.send, body, want)
				}
			}
			recs := r.audit.wait(t, 5)
			if recs[0].Reason != tx.Fill("egress.not_listed", "target", other) {
				t.Errorf("the audit's reason: %q", recs[0].Reason)
			}
		})
	}
	en, ja := catalog.Or("en").Text("egress.not_listed"), catalog.Or("ja").Text("egress.not_listed")
	if en == ja || !strings.Contains(ja, "egress.allow") {
		t.Errorf("the locales' texts: en %q, ja %q", en, ja)
	}
}

// blackhole returns the address of a listener that never accepts and
// whose queue is full, so that a new connection to it is never answered
// (its SYN is dropped), as a host that does not answer.
func blackhole(t *testing.T) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port)
	// Fill the queue: connections complete until it is full, then hang.
	for range 8 {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err != nil {
			return addr
		}
		t.Cleanup(func() { c.Close() })
	}
	t.Skip("the listen queue never filled")
	return ""
}

// TestDialTimeout: a host that never answers the connection is given up
// after the dial timeout, with a 504 saying so, a tunnel and a forwarded
// request alike.
func TestDialTimeout(t *testing.T) {
	addr := blackhole(t)
	r := newRig(t, Config{DialTimeout: 300 * time.Millisecond}, nil, addr)
	want := "Baton egress proxy: " + addr + " did not answer within 300ms"
	if status, _, _ := r.connect(t, addr); !strings.HasPrefix(status, "504") || !strings.Contains(status, want) {
		t.Errorf("CONNECT to a host that never answers: %q", status)
	}
	resp, err := r.client().Get("http://" + addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusGatewayTimeout || !strings.Contains(string(body), want) {
		t.Errorf("GET from a host that never answers: %d %q", resp.StatusCode, body)
	}
	for _, rec := range r.audit.wait(t, 2) {
		if !strings.Contains(rec.Reason, "did not answer within 300ms") {
			t.Errorf("audit: %+v", rec)
		}
	}
}

// TestBridgeWordsUnreachableProxy: a client of the bridge whose proxy
// cannot be reached is told so in the bridge's locale, from the
// catalogue.
func TestBridgeWordsUnreachableProxy(t *testing.T) {
	for _, loc := range catalog.Locales {
		client, server := net.Pipe()
		go relay(server, "/nonexistent/egress.sock", bridgeTexts{catalog.Or(loc)})
		client.SetReadDeadline(time.Now().Add(20 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(client), nil)
		if err != nil {
			t.Fatalf("%s: %v", loc, err)
		}
		body, _ := io.ReadAll(resp.Body)
		client.Close()
		want := catalog.Or(loc).Fill("egress.bridge_unreachable", "error", "")
		if resp.StatusCode != http.StatusBadGateway || !strings.HasPrefix(string(body), want) {
			t.Errorf("%s: %d %q, want 502 starting %q", loc, resp.StatusCode, body, want)
		}
	}
}
