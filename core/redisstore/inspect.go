package redisstore

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlkit/rlkit/core/algo"
	"github.com/rlkit/rlkit/core/store"
)

// KeyState is the state of one key's counters under a policy, as Inspect
// and Scan read it, without counting.
type KeyState struct {
	// Key is the store key (what a limiter counts a request under:
	// core.Limiter.Key of an identity, or a rule's own key). It is "" for
	// a key Scan found whose hash tag is a digest, which names no key
	// (see Tag).
	Key string
	// Tag is the key as the Redis keys hold it, between the braces of
	// their hash tag: Key escaped (see the package documentation), or,
	// for a key longer than 128 bytes once escaped, "#" and its SHA-256.
	Tag string
	// Limits holds each limit's counter, in policy order.
	Limits []CounterState
	// RetryAfter is how long until a request of cost 1 would be admitted:
	// the longest of the limits' RetryAfter; 0 when it would be now.
	RetryAfter time.Duration
}

// CounterState is one limit's counter of a key, as it stands.
type CounterState struct {
	Limit algo.Limit
	// Remaining is what the key may still take under the limit now: the
	// Remaining a request of cost 0 is answered (the capacity, count or
	// burst, when nothing is counted).
	Remaining int64
	// ResetAfter is how long until the counter is back to its initial
	// state: a fixed window's end; for the other algorithms, until the
	// limit's capacity is whole again.
	ResetAfter time.Duration
	// RetryAfter is, when the limit would deny a request of cost 1, how
	// long until it would admit it; 0 when it would admit it now.
	RetryAfter time.Duration
}

// Over reports whether the key is at or over a limit: a request of cost 1
// would be denied now.
func (k *KeyState) Over() bool { return k.RetryAfter > 0 }

// Remaining is the fewest units any limit has left (0 when the policy
// has no limit).
func (k *KeyState) Remaining() int64 {
	var r int64
	for i, c := range k.Limits {
		if i == 0 || c.Remaining < r {
			r = c.Remaining
		}
	}
	return r
}

// Inspect returns the state of each of keys under p, without counting and
// in one pipeline: per key, two dry runs of the decision script Peek runs,
// at cost 0 (what remains, when it resets) and at cost 1 (whether a
// request would be denied, and for how long), on the server's clock. It
// writes nothing, creates no key, and neither reads nor fills the deny
// cache, so it reports what Redis holds, a Reset made by another process
// included. It is neither batched with decisions nor counted by the
// breakers; the pipeline is bounded by the store's timeout (WithTimeout).
// A key never counted (or whose counters expired) has every limit's
// capacity remaining. Keys are the store keys a limiter counts under (see
// KeyState.Key).
func (s *Store) Inspect(ctx context.Context, p *store.Policy, keys ...string) ([]KeyState, error) {
	tags := make([]string, len(keys))
	for i, k := range keys {
		tags[i] = part(k)
	}
	out, err := s.states(ctx, p, tags)
	for i := range out {
		out[i].Key = keys[i]
	}
	return out, err
}

// InspectTags is Inspect by hash tag: each of tags is a key as the Redis
// keys hold it, between the braces of their hash tag (KeyState.Tag: the
// key escaped, or "#" and its SHA-256 for a key longer than 128 bytes
// once escaped), so that a key Scan found as a digest can be read again.
// Key is the key a tag names, "" for a digest. A tag that is neither an
// escaped key nor a digest is an error, and nothing is read.
func (s *Store) InspectTags(ctx context.Context, p *store.Policy, tags ...string) ([]KeyState, error) {
	for _, t := range tags {
		if err := checkTag(t); err != nil {
			return nil, err
		}
	}
	out, err := s.states(ctx, p, tags)
	for i := range out {
		out[i].Key, _ = unpart(out[i].Tag)
	}
	return out, err
}

// states reads the state of each hash tag's counters under p (see
// Inspect); Key is left empty.
func (s *Store) states(ctx context.Context, p *store.Policy, tags []string) ([]KeyState, error) {
	if s.closed.Load() {
		return nil, ErrClosed
	}
	pl, err := s.plan(p)
	if err != nil {
		return nil, err
	}
	if len(tags) == 0 {
		return nil, nil
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	tail := pl.tailAt(p, s.clock.Now())
	sc := decision[pl.algorithm]
	cmds, err := s.pipeline(ctx, tags, pl, tail)
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		// A node that never ran the script: load it on every node (a
		// ClusterClient loads it on each), then once more.
		if err = s.client.ScriptLoad(s.callContext(ctx), sc.src).Err(); err == nil {
			cmds, err = s.pipeline(ctx, tags, pl, tail)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("redisstore: inspect: %w", err)
	}
	out := make([]KeyState, len(tags))
	for i, tag := range tags {
		ks := &out[i]
		ks.Tag = tag
		ks.Limits = make([]CounterState, len(p.Limits))
		var now, next [store.MaxLimits]algo.Outcome
		if err := outcomes(p, pl, cmds[2*i].Val(), 0, &now); err != nil {
			return nil, err
		}
		if err := outcomes(p, pl, cmds[2*i+1].Val(), 1, &next); err != nil {
			return nil, err
		}
		for j, l := range p.Limits {
			c := CounterState{Limit: l, Remaining: now[j].Remaining, ResetAfter: time.Duration(now[j].ResetAfter)}
			if !next[j].Allowed {
				c.RetryAfter = max(time.Duration(next[j].RetryAfter), 1)
			}
			ks.Limits[j] = c
			ks.RetryAfter = max(ks.RetryAfter, c.RetryAfter)
		}
	}
	return out, nil
}

// pipeline sends, for each tag, the decision script at cost 0 and at
// cost 1 in a dry run, in one pipeline bounded by the store's timeout,
// and returns the commands (two per tag) and the first error.
func (s *Store) pipeline(ctx context.Context, tags []string, pl *plan, tail []any) ([]*redis.Cmd, error) {
	cctx := s.callContext(ctx)
	cmds := make([]*redis.Cmd, 0, 2*len(tags))
	_, err := s.client.Pipelined(cctx, func(pipe redis.Pipeliner) error {
		for _, tag := range tags {
			k := s.prefix + "{" + tag + "}:" + pl.rule
			// Dry runs (-c - 1) of cost 0 and of cost 1: a take of cost
			// 0 may write (see Peek).
			cmds = append(cmds, pipe.Do(cctx, singleArgs(k, pl, tail, ^0)...), pipe.Do(cctx, singleArgs(k, pl, tail, ^1)...))
		}
		return nil
	})
	return cmds, err
}

// outcomes reads the reply of a decision of cost under p, one outcome per
// limit, into out.
func outcomes(p *store.Policy, pl *plan, reply any, cost int64, out *[store.MaxLimits]algo.Outcome) error {
	var r store.Result
	if err := parse(p, pl, reply, cost, &r); err != nil {
		return err
	}
	v, _ := reply.([]any)
	if len(v) == 4*len(p.Limits) {
		return readOutcomes(v, len(p.Limits), out)
	}
	// A one-limit fixed window's lean reply.
	count, _ := v[0].(int64)
	reset, _ := v[1].(int64)
	out[0] = fixedOutcome(p.Limits[0], count, reset, cost)
	return nil
}

var (
	//go:embed lua/inflight.lua
	inflightLua    string
	inflightScript = newScript(inflightLua)
)

// InFlight returns how many slots of key are held now under the
// concurrency limit name (store.Concurrency.Name; a core rule's is the
// rule's name): the leases of its sorted set that have not ended on the
// server's clock. It reads, one script, and writes nothing; it fails as
// Take does.
func (s *Store) InFlight(ctx context.Context, key, name string) (int64, error) {
	return s.inFlight(ctx, slotsKey(s.prefix, key, name))
}

// InFlightTag is InFlight by hash tag (see InspectTags).
func (s *Store) InFlightTag(ctx context.Context, tag, name string) (int64, error) {
	if err := checkTag(tag); err != nil {
		return 0, err
	}
	return s.inFlight(ctx, s.prefix+"{"+tag+"}:"+part(name)+":inflight")
}

// inFlight counts the slots held in the sorted set k.
func (s *Store) inFlight(ctx context.Context, k string) (int64, error) {
	v, err := s.call(ctx, k, inflightScript, []any{evalshaCmd, inflightScript.sha, oneKey, k})
	if err != nil {
		return 0, err
	}
	n, ok := v.(int64)
	if !ok {
		return 0, errors.New("redisstore: unexpected reply to a count of slots")
	}
	return n, nil
}
