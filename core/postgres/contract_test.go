package postgres

import (
	"testing"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/storetest"
)

// TestContract runs core.Store's contract suite on PostgreSQL, each test
// in a schema of its own (see newStore), dropped at its end.
func TestContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T) core.Store { return newStore(t) })
}
