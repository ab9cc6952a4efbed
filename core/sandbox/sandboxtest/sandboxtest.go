// Package sandboxtest helps tests of what runs in Baton's sandbox: a
// directory the sandbox's user can enter when the tests run as root, and a
// listener that counts who reached it.
package sandboxtest

import (
	"net"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
)

// Dir makes a temporary directory every user can enter, removed by
// tb.Cleanup. t.TempDir's parent is private to its owner, so a sandbox
// that drops root to another user cannot reach a workspace below it.
func Dir(tb testing.TB) string {
	tb.Helper()
	dir, err := os.MkdirTemp("", "baton-test-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	return dir
}

// Listen listens on host (an IP address) at a free port, closed by
// tb.Cleanup, accepting and closing every connection. It returns the port
// and how many connections reached it so far.
func Listen(tb testing.TB, host string) (port string, reached func() int) {
	tb.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ln.Close() })
	var n atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			c.Close()
		}
	}()
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port), func() int { return int(n.Load()) }
}
