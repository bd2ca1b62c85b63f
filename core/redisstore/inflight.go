package redisstore

import (
	"context"
	_ "embed"
	"fmt"
	"math/rand/v2"
	"strconv"

	"github.com/rlkit/rlkit/core/store"
)

var (
	//go:embed lua/acquire.lua
	acquireLua string
	//go:embed lua/release.lua
	releaseLua string

	acquireScript = newScript(acquireLua)
	releaseScript = newScript(releaseLua)
)

var _ store.ConcurrencyStore = (*Store)(nil)

// Acquire implements store.ConcurrencyStore: one script on the server's
// clock drops the key's leases that have ended (their processes died
// holding them) and, when fewer than c.Limit remain, adds one that ends
// c.Lease from now. The slots of a key under c are one sorted set,
// prefix + "{" + key + "}:" + name + ":inflight" (name escaped as a
// policy's: see the package documentation), in the key's Cluster slot;
// its TTL is its longest lease. The lease a slot is named by is random,
// 64 bits. It fails for a Concurrency that does not validate
// (store.ErrBadConcurrency), and as Take does. A call that fails after
// the server took the slot leaves it taken until its lease ends.
func (s *Store) Acquire(ctx context.Context, key string, c *store.Concurrency) (lease uint64, ok bool, _ error) {
	if err := c.Validate(); err != nil {
		return 0, false, err
	}
	lease = rand.Uint64() | 1 // 0 is no lease
	k := slotsKey(s.prefix, key, c.Name)
	args := []any{evalshaCmd, acquireScript.sha, oneKey, k, c.Limit, c.Lease.Microseconds(), leaseID(lease)}
	v, err := s.call(ctx, k, acquireScript, args)
	if err != nil {
		return 0, false, err
	}
	reply, _ := v.([]any)
	if len(reply) != 2 {
		return 0, false, fmt.Errorf("redisstore: unexpected reply %T to an acquire", v)
	}
	if taken, _ := reply[0].(int64); taken != 1 {
		return 0, false, nil
	}
	return lease, true, nil
}

// Release implements store.ConcurrencyStore: one script removes the
// lease from the key's slots; a lease no longer held (released before,
// or ended) is nothing to remove. It fails as Take does: the slot then
// comes back when its lease ends.
func (s *Store) Release(ctx context.Context, key string, c *store.Concurrency, lease uint64) error {
	k := slotsKey(s.prefix, key, c.Name)
	_, err := s.call(ctx, k, releaseScript, []any{evalshaCmd, releaseScript.sha, oneKey, k, leaseID(lease)})
	return err
}

// slotsKey is the key of the slots of user under the concurrency limit
// name: beside the user's counters, in their Cluster slot; ":inflight",
// which no counter's key ends with (theirs end with a policy's
// fingerprint, a limit's index or a window's number), sets them apart.
func slotsKey(prefix, user, name string) string {
	return redisKey(prefix, user, part(name)) + ":inflight"
}

// leaseID is the member of a slot's lease in its sorted set.
func leaseID(lease uint64) string { return strconv.FormatUint(lease, 16) }
