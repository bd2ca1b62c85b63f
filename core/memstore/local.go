package memstore

import (
	"github.com/rlkit/rlkit/core/store"
)

var _ store.LocalStore = (*Store)(nil)

// Local reports true: the store keeps its counters in this process, so the
// limiter does not time its calls (see store.LocalStore).
func (*Store) Local() bool { return true }
