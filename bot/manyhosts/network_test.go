//go:build linux

package manyhosts

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// network is where the test's hosts live: network namespaces joined to a
// bridge in the test's own namespace (isolated), or this machine's
// loopback shared by all.
type network struct {
	isolated bool
	prefix   string // of namespace and interface names: "bt" and 4 hex digits
	bridge   string // the bridge's interface; "" when not isolated
	gateway  string // the test's own address on the bridge (or 127.0.0.1)
	subnet   string // the first three octets, "10.213.7"
	next     int    // the last octet of the next host
}

// host is one machine of the test: a network namespace with one address.
type host struct {
	name string
	ns   string // the namespace; "" on the shared loopback
	ip   string
	link string // the bridge side of its veth pair; "" when not isolated
}

// newNetwork makes the test's network, torn down when t ends: isolated
// when running as root with `ip netns` working (and BATON_TEST_NO_NETNS
// is not 1), else the loopback.
func newNetwork(t *testing.T) *network {
	t.Helper()
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	n := &network{prefix: "bt" + hex.EncodeToString(b[:2]), gateway: "127.0.0.1"}
	if os.Geteuid() != 0 || os.Getenv("BATON_TEST_NO_NETNS") == "1" {
		t.Log("not root, or BATON_TEST_NO_NETNS=1: every process on 127.0.0.1, no link cut")
		return n
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Log("no ip command: every process on 127.0.0.1, no link cut")
		return n
	}
	n.subnet = fmt.Sprintf("10.%d.%d", 200+int(b[2])%50, int(b[0])%250)
	n.bridge = n.prefix + "br"
	n.gateway = n.subnet + ".1"
	if err := ipRun("link", "add", n.bridge, "type", "bridge"); err != nil {
		t.Logf("no bridge (%v): every process on 127.0.0.1, no link cut", err)
		n.bridge = ""
		n.gateway = "127.0.0.1"
		return n
	}
	t.Cleanup(func() { _ = ipRun("link", "del", n.bridge) })
	must(t, ipRun("addr", "add", n.gateway+"/24", "dev", n.bridge))
	must(t, ipRun("link", "set", n.bridge, "up"))
	n.isolated = true
	n.next = 2
	return n
}

// addHost adds a host named name (a few letters) to the network.
func (n *network) addHost(t *testing.T, name string) *host {
	t.Helper()
	if !n.isolated {
		return &host{name: name, ip: "127.0.0.1"}
	}
	h := &host{name: name, ns: n.prefix + "-" + name, ip: fmt.Sprintf("%s.%d", n.subnet, n.next), link: n.prefix + name}
	n.next++
	must(t, ipRun("netns", "add", h.ns))
	t.Cleanup(func() { _ = ipRun("netns", "del", h.ns) })
	must(t, ipRun("link", "add", h.link, "type", "veth", "peer", "name", "eth0", "netns", h.ns))
	t.Cleanup(func() { _ = ipRun("link", "del", h.link) })
	must(t, ipRun("link", "set", h.link, "master", n.bridge))
	must(t, ipRun("link", "set", h.link, "up"))
	must(t, ipRun("-n", h.ns, "link", "set", "lo", "up"))
	must(t, ipRun("-n", h.ns, "addr", "add", h.ip+"/24", "dev", "eth0"))
	must(t, ipRun("-n", h.ns, "link", "set", "eth0", "up"))
	return h
}

// command is name with args run on h.
func (h *host) command(name string, args ...string) *exec.Cmd {
	if h.ns == "" {
		return exec.Command(name, args...)
	}
	// ip execs the program: the process started is the program itself,
	// so that a signal to it reaches the program.
	return exec.Command("ip", append([]string{"netns", "exec", h.ns, name}, args...)...)
}

// setLink takes h's link to the bridge down or up: while it is down, h
// reaches nothing and nothing reaches it, as when its network fails.
func (h *host) setLink(up bool) error {
	state := "down"
	if up {
		state = "up"
	}
	return ipRun("link", "set", h.link, state)
}

func ipRun(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return nil
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// forwarder relays TCP connections from an address the hosts reach to a
// server of the test listening on this machine's loopback (the fakes of
// Slack and of the model), and tells which hosts have a connection open.
type forwarder struct {
	ln     net.Listener
	target string

	mu   sync.Mutex
	open map[string]int // guarded by mu: source IP → connections open
}

// forward listens on ip (a free port) and relays to target until t ends.
func forward(t *testing.T, ip, target string) *forwarder {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	f := &forwarder{ln: ln, target: target, open: map[string]int{}}
	t.Cleanup(func() { _ = ln.Close() })
	go f.serve()
	return f
}

// addr is the host:port the hosts dial.
func (f *forwarder) addr() string { return f.ln.Addr().String() }

// busy reports whether a connection from ip is open.
func (f *forwarder) busy(ip string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.open[ip] > 0
}

func (f *forwarder) serve() {
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return
		}
		go f.relay(c)
	}
}

func (f *forwarder) relay(c net.Conn) {
	defer c.Close()
	src, _, _ := net.SplitHostPort(c.RemoteAddr().String())
	f.mu.Lock()
	f.open[src]++
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.open[src]--
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	up, err := (&net.Dialer{}).DialContext(ctx, "tcp", f.target)
	cancel()
	if err != nil {
		return
	}
	defer up.Close()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
	<-done
}
