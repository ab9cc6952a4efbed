//go:build !linux

package main

import "os"

// noEcho leaves echo on outside Linux: the secret is shown as typed.
func noEcho(*os.File) (restore func()) { return func() {} }
