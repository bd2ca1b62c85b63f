package memstore_test

import (
	"testing"
	"time"

	"github.com/rlkit/rlkit/core/memstore"
	"github.com/rlkit/rlkit/core/store"
	"github.com/rlkit/rlkit/core/storetest"
)

func TestConformance(t *testing.T) {
	clock := store.NewManualClock(time.Unix(1_700_000_000, 0))
	storetest.Run(t, func() store.Store {
		return memstore.New(memstore.WithClock(clock))
	}, storetest.WithClock(clock))
}

func TestConformanceRealTime(t *testing.T) {
	if testing.Short() {
		t.Skip("waits in real time")
	}
	storetest.Run(t, func() store.Store { return memstore.New() })
}
