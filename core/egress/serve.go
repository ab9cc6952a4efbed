package egress

import (
	"bufio"
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// errHeaderTooLong ends the read of a request line and headers longer than
// MaxHeaderBytes.
var errHeaderTooLong = errors.New("request line and headers too long")

// limited reads from r until n bytes have been read, then fails with
// errHeaderTooLong; n is lifted once the headers are in.
type limited struct {
	r io.Reader
	n int64
}

func (l *limited) Read(p []byte) (int, error) {
	if l.n <= 0 {
		return 0, errHeaderTooLong
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	n, err := l.r.Read(p)
	l.n -= int64(n)
	return n, err
}

// refusal is a request the proxy does not carry out: the HTTP status the
// client gets and why, in words people read.
type refusal struct {
	status  int
	outcome string // Denied or Asked
	rule    string
	reason  string
}

func (r *refusal) Error() string { return r.reason }

// serveConn serves one client connection, open the open-th at once when
// it was accepted: a CONNECT, or plain HTTP requests forwarded one after
// the other; past cfg.MaxOpen it is refused.
func (s *Session) serveConn(c net.Conn, open int) {
	cfg := &s.p.cfg
	if open > cfg.MaxOpen {
		s.refuse(c, nil, Record{Method: "?"}, time.Now(), &refusal{status: http.StatusTooManyRequests, outcome: Denied, rule: "egress.max_open",
			reason: s.p.say("max_open", "n", strconv.Itoa(cfg.MaxOpen))})
		return
	}
	lim := &limited{r: c, n: MaxHeaderBytes}
	br := bufio.NewReaderSize(lim, 4096)
	for first := true; ; first = false {
		c.SetReadDeadline(time.Now().Add(cfg.HeaderTimeout))
		lim.n = MaxHeaderBytes
		start := time.Now()
		req, err := http.ReadRequest(br)
		if err != nil {
			// A client that leaves, or keeps a connection idle after a
			// request, is no news.
			if !first || errors.Is(err, io.EOF) {
				return
			}
			s.refuse(c, nil, Record{Method: "?"}, start, s.p.badRequest(err))
			return
		}
		c.SetReadDeadline(time.Time{})
		lim.n = math.MaxInt64
		if req.Method == http.MethodConnect {
			s.connect(c, br, req, start)
			return
		}
		if !s.forward(c, req, start) {
			return
		}
	}
}

// badRequest words a request that could not be read.
func (p *Proxy) badRequest(err error) *refusal {
	var ne net.Error
	switch {
	case errors.Is(err, errHeaderTooLong):
		return &refusal{status: http.StatusRequestHeaderFieldsTooLarge, outcome: Denied, rule: "proxy",
			reason: p.say("header_too_long", "n", strconv.Itoa(MaxHeaderBytes))}
	case errors.As(err, &ne) && ne.Timeout():
		return &refusal{status: http.StatusRequestTimeout, outcome: Denied, rule: "proxy", reason: p.say("header_timeout")}
	}
	return &refusal{status: http.StatusBadRequest, outcome: Denied, rule: "proxy", reason: p.say("malformed", "error", clip(err.Error(), 200))}
}

// connect serves a CONNECT: a tunnel to the host, bytes relayed untouched.
func (s *Session) connect(c net.Conn, br *bufio.Reader, req *http.Request, start time.Time) {
	rec := Record{Method: http.MethodConnect}
	t, err := parseTarget(req.RequestURI, 0)
	if err != nil {
		s.refuse(c, req, rec, start, &refusal{status: http.StatusBadRequest, outcome: Denied, rule: "proxy",
			reason: s.p.say("connect_target", "target", strconv.Quote(clip(req.RequestURI, 200)))})
		return
	}
	rec.Host, rec.Port = t.host, t.port
	addrs, rule, ref := s.admit(t)
	if ref != nil {
		s.refuse(c, req, rec, start, ref)
		return
	}
	rec.Outcome, rec.Rule = Allowed, rule
	if creds := s.p.credentials(t, s.cfg.Job); len(creds) > 0 {
		rec.Reason = s.terminate(c, br, t, addrs, creds, &rec)
		s.finish(rec, start)
		return
	}
	up, addr, err := s.dial(t, addrs)
	if err != nil {
		rec.Reason = err.Error()
		s.refuse(c, req, rec, start, &refusal{status: dialStatus(err), outcome: Allowed, rule: rule, reason: err.Error()})
		return
	}
	defer up.Close()
	rec.Addr = addr.String()
	c.SetWriteDeadline(time.Now().Add(s.p.cfg.IdleTimeout))
	if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		rec.Reason = s.p.say("client_left")
		s.finish(rec, start)
		return
	}
	c.SetWriteDeadline(time.Time{})
	rec.BytesUp, rec.BytesDown, rec.Reason = s.pipe(c, br, up)
	s.finish(rec, start)
}

// credentials returns the headers to add to requests to t for job: none
// without a CA to terminate TLS with.
func (p *Proxy) credentials(t target, job Job) http.Header {
	if p.cfg.CA == nil {
		return nil
	}
	h := http.Header{}
	for _, c := range p.cfg.Credentials {
		if c.Match.matches(t, job) {
			h.Add(c.Header, c.Value)
		}
	}
	return h
}

// terminate serves a CONNECT to t, a host with credentials: it answers
// the client's TLS with a certificate of Baton's CA for t, then carries
// each request the client sends to t over TLS verified against
// Config.UpstreamRoots, with creds added. rec gets the bytes of them all;
// it returns why it stopped early, or "".
func (s *Session) terminate(c net.Conn, br *bufio.Reader, t target, addrs []netip.Addr, creds http.Header, rec *Record) string {
	cfg := &s.p.cfg
	cert, err := cfg.CA.leaf(t.host, time.Now())
	if err != nil {
		ref := &refusal{status: http.StatusBadGateway, outcome: Allowed, reason: s.p.say("no_certificate", "host", t.host, "error", clip(err.Error(), 200))}
		s.p.writeRefusal(c, nil, ref)
		return ref.reason
	}
	c.SetWriteDeadline(time.Now().Add(cfg.IdleTimeout))
	if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return s.p.say("client_left")
	}
	c.SetWriteDeadline(time.Time{})
	tc := tls.Server(&bufferedConn{Conn: c, r: br}, &tls.Config{
		Certificates: []tls.Certificate{*cert}, NextProtos: []string{"http/1.1"}, MinVersion: tls.VersionTLS12,
	})
	defer tc.Close()
	tc.SetDeadline(time.Now().Add(cfg.HeaderTimeout))
	if err := tc.HandshakeContext(s.ctx); err != nil {
		return s.p.say("client_tls", "error", clip(err.Error(), 200))
	}
	tc.SetDeadline(time.Time{})
	upstream := &tls.Config{RootCAs: cfg.UpstreamRoots, MinVersion: tls.VersionTLS12}
	lim := &limited{r: tc, n: MaxHeaderBytes}
	tr := bufio.NewReaderSize(lim, 4096)
	for {
		tc.SetReadDeadline(time.Now().Add(cfg.HeaderTimeout))
		lim.n = MaxHeaderBytes
		req, err := http.ReadRequest(tr)
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) {
				return ""
			}
			ref := s.p.badRequest(err)
			s.p.writeRefusal(tc, nil, ref)
			return ref.reason
		}
		tc.SetReadDeadline(time.Time{})
		lim.n = math.MaxInt64
		if n := s.made.Add(1); n > int64(cfg.MaxConnections) {
			ref := s.p.connectionsRefusal()
			s.p.writeRefusal(tc, req, ref)
			return ref.reason
		}
		if s.bytes.Load() >= cfg.MaxBytes {
			ref := s.p.bytesRefusal()
			s.p.writeRefusal(tc, req, ref)
			return ref.reason
		}
		req.URL.Scheme, req.URL.Host = "https", t.String()
		var one Record
		keep, err := s.exchange(tc, req, t, addrs, upstream, creds, &one)
		rec.Addr = cmp.Or(one.Addr, rec.Addr)
		rec.BytesUp += one.BytesUp
		rec.BytesDown += one.BytesDown
		if err != nil {
			return err.Error()
		}
		if !keep {
			return ""
		}
	}
}

// bufferedConn is a connection whose first bytes were already read into r.
type bufferedConn struct {
	net.Conn
	r io.Reader
}

func (c *bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// forward serves one plain HTTP request for an absolute http:// URL and
// reports whether the client's connection may carry another.
func (s *Session) forward(c net.Conn, req *http.Request, start time.Time) bool {
	rec := Record{Method: req.Method}
	if req.URL.Scheme != "http" || req.URL.Host == "" {
		s.refuse(c, req, rec, start, &refusal{status: http.StatusBadRequest, outcome: Denied, rule: "proxy", reason: s.p.say("not_absolute")})
		return false
	}
	t, err := parseTarget(req.URL.Host, 80)
	if err != nil {
		s.refuse(c, req, rec, start, &refusal{status: http.StatusBadRequest, outcome: Denied, rule: "proxy",
			reason: s.p.say("bad_target", "target", strconv.Quote(clip(req.URL.Host, 200)))})
		return false
	}
	rec.Host, rec.Port = t.host, t.port
	addrs, rule, ref := s.admit(t)
	if ref != nil {
		s.refuse(c, req, rec, start, ref)
		return false
	}
	rec.Outcome, rec.Rule = Allowed, rule
	keep, err := s.exchange(c, req, t, addrs, nil, nil, &rec)
	if err != nil {
		rec.Reason = err.Error()
	}
	s.finish(rec, start)
	return keep && err == nil
}

// exchange sends req to t at one of addrs (over TLS with tlsCfg when not
// nil, with header added) and writes the response to c. It reports
// whether c may carry another request; rec gets the address and the
// bytes. A failure before the response began is answered to the client.
func (s *Session) exchange(c net.Conn, req *http.Request, t target, addrs []netip.Addr, tlsCfg *tls.Config, header http.Header, rec *Record) (bool, error) {
	cfg := &s.p.cfg
	// The transport dials, reads and writes in goroutines of its own.
	up := &countConn{s: s, idle: cfg.IdleTimeout}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			conn, addr, err := s.dial(t, addrs)
			if err != nil {
				return nil, err
			}
			up.attach(conn, addr)
			return up, nil
		},
		DisableKeepAlives:      true,
		DisableCompression:     true,
		ResponseHeaderTimeout:  cfg.IdleTimeout,
		TLSHandshakeTimeout:    cfg.DialTimeout,
		MaxResponseHeaderBytes: 1 << 20,
		TLSClientConfig:        tlsCfg,
	}
	defer func() { rec.Addr, rec.BytesUp, rec.BytesDown = up.counts() }()
	defer tr.CloseIdleConnections()
	scheme := "http"
	if tlsCfg != nil {
		scheme = "https"
	}
	out := req.Clone(s.ctx)
	out.RequestURI = ""
	out.URL.Scheme, out.URL.Host = scheme, t.String()
	out.Host = "" // the host decided on, whatever the Host header said
	removeHopHeaders(out.Header)
	for k, vs := range header {
		out.Header[k] = vs
	}
	resp, err := tr.RoundTrip(out)
	if err != nil {
		var ref *refusal
		var we *wordedError
		switch {
		case errors.As(err, &ref):
		case errors.As(err, &we):
			ref = &refusal{status: dialStatus(err), outcome: Allowed, reason: we.text}
		default:
			ref = &refusal{status: dialStatus(err), outcome: Allowed, reason: s.p.say("no_answer", "target", t.String(), "error", clip(err.Error(), 200))}
		}
		s.p.writeRefusal(c, req, ref)
		return false, ref
	}
	defer resp.Body.Close()
	keep := !req.Close && (resp.ContentLength >= 0 || chunked(resp.TransferEncoding) || noBody(req, resp))
	resp.Close = !keep
	removeHopHeaders(resp.Header)
	if err := resp.Write(&idleWriter{c: c, idle: cfg.IdleTimeout}); err != nil {
		return false, &wordedError{text: s.p.say("relay_response", "error", clip(err.Error(), 200)), err: err}
	}
	return keep, nil
}

func chunked(te []string) bool { return len(te) > 0 && te[0] == "chunked" }

// noBody reports whether resp carries no body whatever its headers say.
func noBody(req *http.Request, resp *http.Response) bool {
	return req.Method == http.MethodHead || resp.StatusCode == http.StatusNoContent ||
		resp.StatusCode == http.StatusNotModified || resp.StatusCode/100 == 1
}

// hopHeaders concern one connection, not the request: never forwarded (as
// net/http/httputil's ReverseProxy). Proxy-Authorization is among them:
// the proxy asks the sandbox for nothing, and a header the sandbox wrote
// goes nowhere.
var hopHeaders = []string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization",
	"Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

func removeHopHeaders(h http.Header) {
	for _, f := range h.Values("Connection") {
		for sf := range strings.SplitSeq(f, ",") {
			if sf = strings.TrimSpace(sf); sf != "" {
				h.Del(sf)
			}
		}
	}
	for _, k := range hopHeaders {
		h.Del(k)
	}
}

// admit decides on t for the session's job: the caps, the rules, the
// addresses and, when the rules ask, the Asker. It returns the addresses
// to connect to and the rule that let them through, or the refusal.
func (s *Session) admit(t target) ([]netip.Addr, string, *refusal) {
	cfg, job := &s.p.cfg, s.cfg.Job
	if n := s.made.Add(1); n > int64(cfg.MaxConnections) {
		return nil, "", s.p.connectionsRefusal()
	}
	if s.bytes.Load() >= cfg.MaxBytes {
		return nil, "", s.p.bytesRefusal()
	}
	d := cfg.Policy.decide(t, job)
	if !d.allow && !d.ask {
		reason := s.p.say("not_listed", "target", t.String())
		if d.rule != "egress.default" {
			reason = s.p.say("rule_refuses", "rule", d.rule, "target", t.String())
		}
		return nil, "", &refusal{status: http.StatusForbidden, outcome: Denied, rule: d.rule, reason: reason}
	}
	addrs, ref := s.addresses(t, d.ask)
	if ref != nil {
		ref.rule = d.rule
		return nil, "", ref
	}
	if !d.ask {
		return addrs, d.rule, nil
	}
	a, err := s.ask(t, addrs)
	switch {
	case err != nil:
		s.log.Warn("could not ask about a connection; refusing it", "host", t.String(), "err", err)
		return nil, "", &refusal{status: http.StatusForbidden, outcome: Denied, rule: d.rule, reason: s.p.say("ask_failed", "target", t.String())}
	case a.Outcome == Allowed:
		return addrs, a.Rule, nil
	case a.Outcome == Asked:
		reason := a.Reason
		if reason == "" {
			reason = s.p.say("asked", "target", t.String())
		}
		return nil, "", &refusal{status: http.StatusForbidden, outcome: Asked, rule: d.rule, reason: reason}
	}
	reason := a.Reason
	if reason == "" {
		reason = s.p.say("denied", "target", t.String())
	}
	rule := a.Rule
	if rule == "" {
		rule = d.rule
	}
	return nil, "", &refusal{status: http.StatusForbidden, outcome: Denied, rule: rule, reason: reason}
}

// connectionsRefusal refuses a connection past Config.MaxConnections.
func (p *Proxy) connectionsRefusal() *refusal {
	return &refusal{status: http.StatusTooManyRequests, outcome: Denied, rule: "egress.max_connections",
		reason: p.say("max_connections", "n", strconv.Itoa(p.cfg.MaxConnections))}
}

// bytesRefusal ends a connection once the job's bytes passed
// Config.MaxBytes.
func (p *Proxy) bytesRefusal() *refusal {
	return &refusal{status: http.StatusTooManyRequests, outcome: Denied, rule: "egress.max_bytes",
		reason: p.say("max_bytes", "n", strconv.FormatInt(p.cfg.MaxBytes, 10))}
}

// ask puts t to the session's Asker, for at most Config.AskTimeout.
func (s *Session) ask(t target, addrs []netip.Addr) (Answer, error) {
	if s.cfg.Asker == nil {
		return Answer{Outcome: Denied, Reason: s.p.say("nobody_to_ask", "target", t.String())}, nil
	}
	ctx, cancel := context.WithTimeout(s.ctx, s.p.cfg.AskTimeout)
	defer cancel()
	a, err := s.cfg.Asker.Ask(ctx, Question{Job: s.cfg.Job, Host: t.host, Port: t.port, Addrs: addrs})
	if err == nil && a.Outcome != Allowed && a.Outcome != Asked && a.Outcome != Denied {
		err = fmt.Errorf("the asker answered %q", a.Outcome)
	}
	return a, err
}

// addresses resolves t once and keeps the addresses the job may reach: a
// special address only when an allow entry names it literally (at t's
// port, unless a person is to be asked).
func (s *Session) addresses(t target, ask bool) ([]netip.Addr, *refusal) {
	all := []netip.Addr{t.ip}
	if !t.ip.IsValid() {
		ctx, cancel := context.WithTimeout(s.ctx, s.p.cfg.DialTimeout)
		defer cancel()
		var err error
		all, err = s.p.resolve.LookupNetIP(ctx, "ip", t.host)
		if err != nil || len(all) == 0 {
			why := s.p.say("no_address")
			if err != nil {
				why = clip(err.Error(), 200)
			}
			return nil, &refusal{status: http.StatusBadGateway, outcome: Denied, reason: s.p.say("cannot_resolve", "host", t.host, "error", why)}
		}
	}
	var ok, refused []netip.Addr
	for _, ip := range all {
		ip = ip.Unmap()
		if ip.Zone() != "" || ((Special(ip) || s.p.local[ip]) && !s.p.cfg.Policy.literal(ip, t, s.cfg.Job, ask)) {
			refused = append(refused, ip)
			continue
		}
		ok = append(ok, ip)
	}
	if len(ok) == 0 {
		reason := s.p.say("special_name", "host", t.host, "addr", refused[0].String())
		if t.ip.IsValid() {
			reason = s.p.say("special_addr", "host", t.host)
		}
		return nil, &refusal{status: http.StatusForbidden, outcome: Denied, reason: reason}
	}
	return ok, nil
}

// dial connects to the first of addrs that answers at t's port, within
// Config.DialTimeout.
func (s *Session) dial(t target, addrs []netip.Addr) (net.Conn, netip.AddrPort, error) {
	ctx, cancel := context.WithTimeout(s.ctx, s.p.cfg.DialTimeout)
	defer cancel()
	var d net.Dialer
	var last error
	for _, ip := range addrs {
		ap := netip.AddrPortFrom(ip, uint16(t.port))
		c, err := d.DialContext(ctx, "tcp", ap.String())
		if err == nil {
			return c, ap, nil
		}
		last = err
		if ctx.Err() != nil || timeout(err) {
			break
		}
	}
	// The dialer's own deadline, taken from ctx, may end the dial a
	// moment before ctx's timer does: either is the host not answering.
	if ctx.Err() != nil || timeout(last) {
		return nil, netip.AddrPort{}, &wordedError{text: s.p.say("dial_timeout", "target", t.String(), "timeout", s.p.cfg.DialTimeout.String()), err: os.ErrDeadlineExceeded}
	}
	return nil, netip.AddrPort{}, &wordedError{text: s.p.say("dial_failed", "target", t.String(), "error", clip(last.Error(), 200)), err: last}
}

// wordedError is an error whose text is the catalogue's, for the client
// and the audit; it wraps the error it words, for errors.Is.
type wordedError struct {
	text string
	err  error
}

func (e *wordedError) Error() string { return e.text }
func (e *wordedError) Unwrap() error { return e.err }

func dialStatus(err error) int {
	if timeout(err) {
		return http.StatusGatewayTimeout
	}
	return http.StatusBadGateway
}

// timeout reports whether err is a deadline's.
func timeout(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

// refuse answers the client ref and audits the connection.
func (s *Session) refuse(c net.Conn, req *http.Request, rec Record, start time.Time, ref *refusal) {
	c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	s.p.writeRefusal(c, req, ref)
	rec.Outcome, rec.Reason = ref.outcome, ref.reason
	if rec.Rule == "" {
		rec.Rule = ref.rule
	}
	s.finish(rec, start)
}

// writeRefusal writes ref as the response to req: its status, a header
// saying it is the proxy's, and the reason as a text body.
func (p *Proxy) writeRefusal(w io.Writer, req *http.Request, ref *refusal) {
	body := p.say("refusal", "reason", ref.reason) + "\n"
	resp := &http.Response{
		StatusCode: ref.status, ProtoMajor: 1, ProtoMinor: 1, Request: req, Close: true,
		Header:        http.Header{"Content-Type": {"text/plain; charset=utf-8"}, "X-Baton-Egress": {ref.outcome}},
		ContentLength: int64(len(body)), Body: io.NopCloser(strings.NewReader(body)),
	}
	_ = resp.Write(w)
}

// finish audits rec, ended now.
func (s *Session) finish(rec Record, start time.Time) {
	rec.Duration = time.Since(start)
	s.audit(rec)
}

// pipe relays bytes between the client (reading through cr, which may
// hold bytes already read) and the host until both directions end, the
// connection is idle for Config.IdleTimeout or the job's bytes pass
// Config.MaxBytes. It returns the bytes each way and, when the relay was
// cut, why.
func (s *Session) pipe(c net.Conn, cr io.Reader, up net.Conn) (upBytes, downBytes int64, reason string) {
	idle := s.p.cfg.IdleTimeout
	touch := func() {
		d := time.Now().Add(idle)
		c.SetReadDeadline(d)
		up.SetReadDeadline(d)
	}
	touch()
	// A relay cut by a cap or idleness says so; an I/O error (io) is
	// what the cut caused on the other side, told only when nothing else
	// was.
	type result struct {
		n      int64
		reason string
		io     bool
	}
	copyDir := func(dst net.Conn, src io.Reader, done chan<- result) {
		buf := make([]byte, 32<<10)
		var n int64
		for {
			k, err := src.Read(buf)
			if k > 0 {
				touch()
				n += int64(k)
				over := s.bytes.Add(int64(k)) > s.p.cfg.MaxBytes
				if over {
					done <- result{n: n, reason: s.p.bytesRefusal().reason}
					return
				}
				dst.SetWriteDeadline(time.Now().Add(idle))
				if _, werr := dst.Write(buf[:k]); werr != nil {
					done <- result{n: n, reason: s.p.say("relay_write", "error", clip(werr.Error(), 200)), io: true}
					return
				}
			}
			if err != nil {
				var ne net.Error
				switch {
				case errors.Is(err, io.EOF):
					closeWrite(dst)
					done <- result{n: n}
				case errors.As(err, &ne) && ne.Timeout():
					done <- result{n: n, reason: s.p.say("idle", "timeout", idle.String())}
				default:
					done <- result{n: n, reason: s.p.say("relay_read", "error", clip(err.Error(), 200)), io: true}
				}
				return
			}
		}
	}
	ups, downs := make(chan result, 1), make(chan result, 1)
	go copyDir(up, cr, ups)
	go copyDir(c, up, downs)
	var u, d result
	for got := 0; got < 2; got++ {
		select {
		case u = <-ups:
			ups = nil
			if u.reason != "" {
				c.Close()
				up.Close()
			}
		case d = <-downs:
			downs = nil
			if d.reason != "" {
				c.Close()
				up.Close()
			}
		}
	}
	for _, r := range []result{u, d} {
		if r.reason != "" && !r.io {
			return u.n, d.n, r.reason
		}
	}
	return u.n, d.n, cmp.Or(u.reason, d.reason)
}

// closeWrite half-closes c when it can (TCP, Unix), else closes it.
func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
		return
	}
	c.Close()
}

// countConn is a connection to a host for one HTTP exchange: it counts the
// bytes each way into the session's total, fails once the total passes
// Config.MaxBytes, and fails a read after the host has been silent for
// idle. The transport attaches the connection once dialled.
type countConn struct {
	net.Conn
	s        *Session
	idle     time.Duration
	addr     atomic.Pointer[netip.AddrPort]
	up, down atomic.Int64
}

func (c *countConn) attach(conn net.Conn, addr netip.AddrPort) {
	c.Conn = conn
	c.addr.Store(&addr)
}

// counts returns the address connected to ("" when none) and the bytes
// each way.
func (c *countConn) counts() (addr string, up, down int64) {
	if a := c.addr.Load(); a != nil {
		addr = a.String()
	}
	return addr, c.up.Load(), c.down.Load()
}

func (c *countConn) Read(p []byte) (int, error) {
	c.Conn.SetReadDeadline(time.Now().Add(c.idle))
	n, err := c.Conn.Read(p)
	c.down.Add(int64(n))
	if c.s.bytes.Add(int64(n)) > c.s.p.cfg.MaxBytes {
		return n, c.s.p.bytesRefusal()
	}
	return n, err
}

func (c *countConn) Write(p []byte) (int, error) {
	if c.s.bytes.Add(int64(len(p))) > c.s.p.cfg.MaxBytes {
		return 0, c.s.p.bytesRefusal()
	}
	// Counted before it is sent: the host may answer, and the exchange
	// end, before this goroutine runs again.
	c.up.Add(int64(len(p)))
	c.Conn.SetWriteDeadline(time.Now().Add(c.idle))
	n, err := c.Conn.Write(p)
	c.up.Add(int64(n - len(p)))
	return n, err
}

// idleWriter writes to c, failing a write the client has not taken within
// idle.
type idleWriter struct {
	c    net.Conn
	idle time.Duration
}

func (w *idleWriter) Write(p []byte) (int, error) {
	w.c.SetWriteDeadline(time.Now().Add(w.idle))
	return w.c.Write(p)
}

// clip cuts s to at most n bytes, on a character boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8Start(s[n]) {
		n--
	}
	return s[:n] + "…"
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }
