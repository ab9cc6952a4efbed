// Package workspacetest helps tests attack a workspace the way an agent's
// Bash could.
package workspacetest

import (
	"os"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// Swap makes dir (an existing folder) trade places with a symlink to target
// over and over, each swap one atomic rename (RENAME_EXCHANGE), so that dir
// is the link about half of the time. It runs until the returned stop is
// called, which waits for it to end, leaves dir a folder again and returns
// how many swaps happened. The test fails if the swaps cannot start.
func Swap(tb testing.TB, dir, target string) (stop func() int) {
	tb.Helper()
	link := dir + ".swap"
	if err := os.Symlink(target, link); err != nil {
		tb.Fatal(err)
	}
	if err := unix.Renameat2(unix.AT_FDCWD, dir, unix.AT_FDCWD, link, unix.RENAME_EXCHANGE); err != nil {
		tb.Fatalf("swap %s: %v", dir, err)
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	n := 1
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			default:
			}
			if unix.Renameat2(unix.AT_FDCWD, dir, unix.AT_FDCWD, link, unix.RENAME_EXCHANGE) == nil {
				n++
			}
		}
	}()
	return func() int {
		close(done)
		wg.Wait()
		if n%2 == 1 { // dir is the link
			unix.Renameat2(unix.AT_FDCWD, dir, unix.AT_FDCWD, link, unix.RENAME_EXCHANGE)
		}
		os.Remove(link)
		return n
	}
}
