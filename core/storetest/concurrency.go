package storetest

import (
	"fmt"
	"sync"
	"testing"

	"github.com/baton-bot/baton/core"
)

func testConcurrentWriters(t *testing.T, s core.Store) {
	task := newTask(t, s)
	const goroutines, each = 20, 50
	var wg sync.WaitGroup
	errs := make(chan error, goroutines*each)
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				_, err := s.AddComment(t.Context(), core.Comment{TaskID: task.ID, PlatformMsgID: fmt.Sprintf("%d-%d", g, i), Text: "x"})
				if err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("AddComment: %v", err)
	}
	cs, err := s.RecentComments(t.Context(), task.ID, goroutines*each+10)
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != goroutines*each {
		t.Errorf("stored %d comments, want %d", len(cs), goroutines*each)
	}
}
