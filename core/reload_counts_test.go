package core_test

import (
	"testing"
	"time"

	"github.com/rlkit/rlkit/core/memstore"
	"github.com/rlkit/rlkit/core/store"
	"github.com/rlkit/rlkit/internal/reloadtest"
)

// TestReloadKeepsCounts plays the reload scenario on the memory store.
func TestReloadKeepsCounts(t *testing.T) {
	clock := store.NewManualClock(time.Unix(1_700_000_000, 0))
	reloadtest.Run(t, func() store.Store { return memstore.New(memstore.WithClock(clock)) }, clock)
}
