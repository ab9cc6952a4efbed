package egress

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"sync"
	"syscall"

	"github.com/baton-bot/baton/core/catalog"
)

// The bridge runs inside the sandbox, whose network namespace has nothing
// but its loopback: it listens on BridgeAddr there, relays every
// connection to the session's Unix socket bound in at BridgeSocket, and
// runs the command behind it. Clients find it through the proxy variables
// the sandbox sets; a program that ignores them reaches nothing.

// BridgeSubcommand is the argument that makes the baton binary run
// Bridge: `baton sandbox-bridge --socket PATH -- COMMAND…`.
const BridgeSubcommand = "sandbox-bridge"

// BridgeAddr is where the bridge listens inside the sandbox; the proxy
// variables point at it.
const BridgeAddr = "127.0.0.1:3128"

// BridgeSocket is where the sandbox shows the session's socket.
const BridgeSocket = "/run/baton/egress.sock"

// BridgeArgs returns the command line that runs argv behind the bridge:
// exe (a binary that runs Bridge for BridgeSubcommand) with the socket at
// socket inside the sandbox, wording its own failures in locale.
func BridgeArgs(exe, socket, locale string, argv []string) []string {
	return append([]string{exe, BridgeSubcommand, "--socket", socket, "--listen", BridgeAddr, "--locale", locale, "--"}, argv...)
}

// BridgeFailed is the exit code of a bridge that could not start its
// command (bad arguments, the address taken, the command not found).
const BridgeFailed = 125

// BridgeConfig is what the bridge is told on its command line.
type BridgeConfig struct {
	Socket string // the proxy's Unix socket (default BridgeSocket)
	Listen string // the address to listen on (default BridgeAddr)
	// Locale is the catalogue's locale of what the bridge tells a client
	// when the proxy cannot be reached ("": English).
	Locale string
	Argv   []string // the command
}

// BridgeMain parses the bridge's command line as BridgeArgs writes it
// (--socket PATH, --listen ADDR, -- and the command) and runs Bridge. A
// test binary standing in for baton calls it for BridgeSubcommand.
func BridgeMain(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet(BridgeSubcommand, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg BridgeConfig
	fs.StringVar(&cfg.Socket, "socket", BridgeSocket, "the egress proxy's Unix `socket`")
	fs.StringVar(&cfg.Listen, "listen", BridgeAddr, "`address` to listen on")
	fs.StringVar(&cfg.Locale, "locale", "en", "the `locale` of what a client is told")
	if err := fs.Parse(args); err != nil {
		return BridgeFailed
	}
	cfg.Argv = fs.Args()
	return Bridge(cfg, stderr)
}

// Bridge is `baton sandbox-bridge`: it listens, starts the command with
// the bridge's standard files and environment, relays connections until
// the command exits, and returns its exit status (128+n when a signal n
// ended it; BridgeFailed when it could not start it). The signals that ask
// a program to stop are passed on to the command. Any file descriptor
// above 2 the bridge inherited is kept from the command.
func Bridge(cfg BridgeConfig, stderr io.Writer) int {
	if cfg.Socket == "" {
		cfg.Socket = BridgeSocket
	}
	if cfg.Listen == "" {
		cfg.Listen = BridgeAddr
	}
	argv := cfg.Argv
	if len(argv) == 0 {
		fmt.Fprintf(stderr, "%s: no command to run (write it after --)\n", BridgeSubcommand)
		return BridgeFailed
	}
	keepFromChildren()
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", BridgeSubcommand, err)
		return BridgeFailed
	}
	defer ln.Close()
	go relayAll(ln, cfg.Socket, bridgeTexts{catalog.Or(cfg.Locale)})

	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT)
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", BridgeSubcommand, err)
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			return 127
		}
		return BridgeFailed
	}
	done := make(chan struct{})
	go func() {
		for {
			select {
			case s := <-sigs:
				cmd.Process.Signal(s)
			case <-done:
				return
			}
		}
	}()
	err = cmd.Wait()
	close(done)
	if st, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && st.Signaled() {
		return 128 + int(st.Signal())
	}
	if err != nil && cmd.ProcessState == nil {
		return BridgeFailed
	}
	return cmd.ProcessState.ExitCode()
}

// keepFromChildren marks every inherited descriptor above 2 close-on-exec
// (the binary handed in as descriptor 3, say), so that the command gets
// none of them.
func keepFromChildren() {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range entries {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			syscall.CloseOnExec(fd)
		}
	}
}

// bridgeTexts words what the bridge tells a client (the catalogue's
// egress section).
type bridgeTexts struct{ tx *catalog.Texts }

func (b bridgeTexts) say(key string, vars ...string) string { return b.tx.Fill("egress."+key, vars...) }

// relayAll relays every connection ln accepts to the Unix socket, until ln
// is closed.
func relayAll(ln net.Listener, socket string, tx bridgeTexts) {
	for {
		c, err := ln.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return
		}
		go relay(c, socket, tx)
	}
}

// relay copies bytes both ways between c and a new connection to socket,
// half-closing each side as the other ends.
func relay(c net.Conn, socket string, tx bridgeTexts) {
	defer c.Close()
	up, err := net.Dial("unix", socket)
	if err != nil {
		io.WriteString(c, "HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"+
			tx.say("bridge_unreachable", "error", clip(err.Error(), 200))+"\n")
		return
	}
	defer up.Close()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		io.Copy(up, c)
		closeWrite(up)
	}()
	go func() {
		defer wg.Done()
		io.Copy(c, up)
		closeWrite(c)
	}()
	wg.Wait()
}
