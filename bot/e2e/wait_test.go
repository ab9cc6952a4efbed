package e2e_test

import (
	"testing"
	"time"
)

// eventually polls cond until it holds, failing t after a generous
// deadline (10 s) with what it waited for. It is for outcomes that come
// asynchronously; it asserts nothing about how long they take.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
