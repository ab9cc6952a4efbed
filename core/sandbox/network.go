package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
)

// blockedRanges are unreachable from a sandbox given the network: the
// host's loopback and the private, link-local, shared, reserved and
// multicast ranges, where the host's own services and the local network
// live. (The host's own addresses are added per command.)
var blockedRanges = []string{
	"0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12",
	"192.0.0.0/24", "192.168.0.0/16", "198.18.0.0/15", "224.0.0.0/4", "240.0.0.0/4",
	"::1/128", "fc00::/7", "fe80::/10", "ff00::/8", "64:ff9b::/96", "64:ff9b:1::/48",
}

// netScript runs in pasta's namespace, where it holds CAP_NET_ADMIN, before
// bubblewrap: it adds a "prohibit" routing rule for every blocked range
// (rules come before every routing table, so the routes pasta copied from
// the host, a connected private subnet included, cannot override them;
// the namespace's own addresses stay local), then execs bubblewrap.
// $1 is ip; the rule arguments follow up to "--", then bubblewrap's
// command line.
const netScript = `set -e
ip=$1; shift
while [ "$1" != -- ]; do
	case $1 in
	*:*) [ -s /proc/net/if_inet6 ] && "$ip" -6 rule add to "$1" prohibit ;;
	*) "$ip" -4 rule add to "$1" prohibit ;;
	esac
	shift
done
shift
exec "$@"
`

// pastaArgs returns pasta's command line up to the program it runs in its
// namespace: a network namespace of its own with a tap device, whose
// gateway does not lead to the host's loopback (--no-map-gw), with no port
// forwarded either way (-t, -u, -T, -U none), in the foreground, quiet.
// bubblewrap's command line follows.
func (s *Sandbox) pastaArgs() []string {
	args := []string{"--config-net", "--no-map-gw", "-t", "none", "-u", "none", "-T", "none", "-U", "none",
		"--foreground", "--quiet", "--log-file", "/dev/null",
		"--", "/bin/sh", "-c", netScript, "sandbox-net", s.ip}
	args = append(args, blockedRanges...)
	args = append(args, hostAddrs()...)
	return append(args, "--")
}

// hostAddrs lists the host's own addresses as single-host prefixes: a
// service listening on the host's public address must stay out of reach
// too.
func hostAddrs() []string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	var out []string
	for _, a := range addrs {
		ipn, ok := a.(*net.IPNet)
		if !ok || ipn.IP.IsLoopback() {
			continue
		}
		if ip4 := ipn.IP.To4(); ip4 != nil {
			out = append(out, ip4.String()+"/32")
		} else {
			out = append(out, ipn.IP.String()+"/128")
		}
	}
	return out
}

// probeNetwork checks that pasta works here and that the host's loopback
// stays unreachable through it.
func (s *Sandbox) probeNetwork(ctx context.Context) error {
	pasta, err := exec.LookPath(s.cfg.PastaPath)
	if err != nil {
		return fmt.Errorf("pasta (passt) not found: %w; install passt or keep tools.bash.network: deny", err)
	}
	ip, err := exec.LookPath(s.cfg.IPPath)
	if err != nil {
		return fmt.Errorf("ip (iproute2) not found: %w", err)
	}
	s.pasta, s.ip = pasta, ip
	s.netErr = nil // let the probe itself ask for the network
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("network probe: %w", err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	dir, cleanup, err := s.probeDir()
	if err != nil {
		return err
	}
	defer cleanup()
	out, err := s.run(ctx, Spec{
		Argv: []string{"/bin/bash", "-c", `if (exec 3<>/dev/tcp/127.0.0.1/` + port + `) 2>/dev/null; then echo REACHED; fi; echo DONE`},
		Dir:  dir, Binds: []Bind{{Path: dir}}, Env: []string{"PATH=" + s.cfg.Path}, Network: true,
	})
	if err != nil {
		s.pasta = ""
		return fmt.Errorf("pasta does not work here (it needs /dev/net/tun usable by the sandbox's user): %w", err)
	}
	switch got := strings.TrimSpace(string(out)); {
	case strings.Contains(got, "REACHED"):
		s.pasta = ""
		return errors.New("the host's loopback is reachable through pasta")
	case got != "DONE":
		s.pasta = ""
		return fmt.Errorf("network probe: unexpected output %q", clip(out))
	}
	return nil
}
