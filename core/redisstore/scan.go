package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"

	"github.com/rlkit/rlkit/core/algo"
	"github.com/rlkit/rlkit/core/store"
)

// scanCount is the COUNT of a SCAN call: about how many keys the server
// examines for it.
const scanCount = 1000

// scanBatch is how many keys' states Scan reads in one pipeline.
const scanBatch = 256

// ScanResult is what a Scan did.
type ScanResult struct {
	// Pattern is the MATCH pattern of its SCAN calls.
	Pattern string
	// Examined is how many keys SCAN examined, over every node: a node
	// whose scan ended examined each of its keys, and counts its DBSIZE
	// when it ended; a node stopped at the bound counts the COUNT of each
	// of its calls, which is about the keys each examined.
	Examined int64
	// Complete reports that every node's scan ended within the bound: each
	// key that had a counter under the policy throughout the scan was
	// found.
	Complete bool
}

// Scan finds the keys that have a counter under p, with SCAN ... MATCH on
// the policy's keys (Pattern: prefix + "{*}:" + its escaped name + "@*",
// or in the INCR+EXPIRE layout the name + ":*") ... COUNT, never KEYS,
// on the server of a Client, on every master of a ClusterClient
// (ForEachMaster, in parallel) and on every shard of a Ring. It reads the
// keys' states as Inspect does, in pipelines of up to 256 keys, and calls
// fn with each batch, one call at a time; an error of fn ends the scan
// and is returned. A key is reported once per scan however many counters
// it has (one per limit, and per window of a fixed window), but for one
// that SCAN itself returns twice, as it may while the keyspace grows.
// Keys of the policy's other terms (a period or algorithm the rule had
// before a reload) and of other policies are left out.
//
// max bounds the work on Redis: the calls on all nodes together ask for
// at most max keys examined (their COUNTs, at most 1,000 each, add up to
// max at most), after which the scan stops and Complete is false. Each
// SCAN call is one round trip that examines about COUNT keys whatever
// the pattern: a scan costs Redis about as much as reading every key's
// name, spread over calls of about a millisecond each (see
// docs/redis.md). The keys Scan remembers, to report each once, grow
// with the keys found, at most about max.
func (s *Store) Scan(ctx context.Context, p *store.Policy, max int64, fn func([]KeyState) error) (ScanResult, error) {
	if max < 1 {
		return ScanResult{}, errNoBound
	}
	pl, err := s.plan(p)
	if err != nil {
		return ScanResult{}, err
	}
	m := s.matcher(p, pl)
	res := ScanResult{Pattern: m.pattern, Complete: true}
	var budget atomic.Int64
	budget.Store(max)
	var mu sync.Mutex // serializes fn and res
	scan := func(ctx context.Context, node redis.UniversalClient, addr string) error {
		if s.closed.Load() {
			return ErrClosed
		}
		seen := map[string]struct{}{}
		var batch []string
		flush := func() error {
			if len(batch) == 0 {
				return nil
			}
			states, err := s.states(ctx, p, batch)
			batch = batch[:0]
			if err != nil {
				return err
			}
			for i := range states {
				states[i].Key, _ = unpart(states[i].Tag)
			}
			mu.Lock()
			defer mu.Unlock()
			return fn(states)
		}
		var cursor uint64
		var examined int64
		done := false
		for !done {
			n := reserve(&budget, scanCount)
			if n == 0 {
				break
			}
			keys, next, err := node.Scan(s.callContext(ctx), cursor, m.pattern, n).Result()
			if err != nil {
				return fmt.Errorf("redisstore: scan %s: %w", addr, err)
			}
			examined += n
			for _, k := range keys {
				tag, ok := m.tag(k)
				if _, dup := seen[tag]; !ok || dup {
					continue
				}
				seen[tag] = struct{}{}
				if batch = append(batch, tag); len(batch) >= scanBatch {
					if err := flush(); err != nil {
						return err
					}
				}
			}
			cursor, done = next, next == 0
		}
		if done {
			size, err := node.DBSize(s.callContext(ctx)).Result()
			if err != nil {
				return fmt.Errorf("redisstore: scan %s: %w", addr, err)
			}
			examined = size
		}
		if err := flush(); err != nil {
			return err
		}
		mu.Lock()
		res.Examined += examined
		res.Complete = res.Complete && done
		mu.Unlock()
		return nil
	}
	switch c := s.client.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
			return scan(ctx, node, node.Options().Addr)
		})
	case *redis.Ring:
		err = c.ForEachShard(ctx, func(ctx context.Context, node *redis.Client) error {
			return scan(ctx, node, node.Options().Addr)
		})
	case *redis.Client:
		err = scan(ctx, c, c.Options().Addr)
	default:
		err = scan(ctx, c, "server")
	}
	if err != nil {
		return ScanResult{Pattern: m.pattern}, err
	}
	return res, nil
}

// reserve takes up to n from budget and returns what it took.
func reserve(budget *atomic.Int64, n int64) int64 {
	for {
		b := budget.Load()
		if b <= 0 {
			return 0
		}
		take := min(b, n)
		if budget.CompareAndSwap(b, b-take) {
			return take
		}
	}
}

// keyMatcher tells the keys of one policy's counters.
type keyMatcher struct {
	pattern string // SCAN's MATCH
	start   string // what every key starts with: the prefix and '{'
	rules   map[string]bool
	window  bool // the keys end with ':' and a window's number
}

// matcher returns the matcher of p's counters in s.
func (s *Store) matcher(p *store.Policy, pl *plan) *keyMatcher {
	m := &keyMatcher{start: s.prefix + "{", rules: map[string]bool{}}
	m.window = p.Algorithm == algo.FixedWindow || p.Calendar()
	name := part(p.Name) + "@"
	switch {
	case pl.rule == plainRule(p.Name):
		// The INCR+EXPIRE layout (a plain rule never holds '@').
		name = pl.rule + ":"
		m.rules[pl.rule] = true
	case p.Calendar():
		// Limit i > 1 is the first's key and "." i (see calendar.lua).
		m.rules[pl.rule] = true
		for i := 2; i <= len(p.Limits); i++ {
			m.rules[pl.rule+"."+strconv.Itoa(i)] = true
		}
	default:
		for i := range p.Limits {
			m.rules[ruleID(p.Name, p.CounterID(i))] = true
		}
	}
	m.pattern = globEscape(s.prefix) + "{*}:" + name + "*"
	return m
}

// tag returns the hash tag of key, when key is a counter of the policy.
func (m *keyMatcher) tag(key string) (string, bool) {
	rest, ok := strings.CutPrefix(key, m.start)
	if !ok {
		return "", false
	}
	tag, rule, ok := strings.Cut(rest, "}:")
	if !ok || strings.ContainsAny(tag, "{}") {
		return "", false
	}
	if m.window {
		i := strings.LastIndexByte(rule, ':')
		if i < 0 || !digits(rule[i+1:]) {
			return "", false
		}
		rule = rule[:i]
	}
	return tag, m.rules[rule]
}

// digits reports whether s is a decimal number, optionally negative.
func digits(s string) bool {
	s = strings.TrimPrefix(s, "-")
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// globEscape escapes the characters of s that a Redis pattern reads as
// its own: *, ?, [, ] and \.
func globEscape(s string) string {
	if !strings.ContainsAny(s, `*?[]\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if strings.IndexByte(`*?[]\`, s[i]) >= 0 {
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// errNoBound is Scan's error for a bound below 1.
var errNoBound = errors.New("redisstore: scan: the bound on keys examined must be at least 1")
