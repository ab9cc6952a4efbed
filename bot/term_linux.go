//go:build linux

package main

import (
	"os"

	"golang.org/x/sys/unix"
)

// noEcho turns tty's echo off, for a secret typed at a prompt, and returns
// the func that turns it back on; where tty is no terminal it does nothing.
func noEcho(tty *os.File) (restore func()) {
	fd := int(tty.Fd())
	t, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return func() {}
	}
	old := *t
	t.Lflag &^= unix.ECHO
	if err := unix.IoctlSetTermios(fd, unix.TCSETS, t); err != nil {
		return func() {}
	}
	return func() { _ = unix.IoctlSetTermios(fd, unix.TCSETS, &old) }
}
