package redisstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

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
// on the server of a Client, on every master of a ClusterClient (found
// with ForEachMaster) and on every shard of a Ring, one node after
// another in the order of their addresses. It reads the keys' states as
// Inspect does, in pipelines of up to 256 keys, and calls fn with each
// batch; an error of fn ends the scan and is returned. A key is reported
// once per scan however many counters it has (one per limit, and per
// window of a fixed window), but for one that SCAN itself returns twice,
// as it may while the keyspace grows. Keys of the policy's other terms (a
// period or algorithm the rule had before a reload) and of other
// policies are left out.
//
// max bounds the work on Redis: the SCAN calls of all nodes together ask
// for max keys examined at most (COUNT, at most 1,000 a call; what a node
// whose scan ended did not use goes to the next), after which the scan
// stops and Complete is false. SCAN examines whole hash buckets, so a
// call examines about COUNT keys, and a node's scan that ends may have
// examined a few more keys than it asked for. Each call is one round trip
// that examines about COUNT keys whatever the pattern: a scan costs Redis
// about as much as reading the name of every key it examines, spread over
// calls of about a millisecond each (see docs/redis.md). The keys Scan
// remembers, to report each once, grow with the keys found: at most
// about max.
func (s *Store) Scan(ctx context.Context, p *store.Policy, max int64, fn func([]KeyState) error) (ScanResult, error) {
	return s.ScanPolicies(ctx, []*store.Policy{p}, max, func(states [][]KeyState) error { return fn(states[0]) })
}

// ScanPolicies is Scan over the counters of several policies in one pass
// (the policies of a rule and of its penalty, say): it finds the keys that
// have a counter under any of ps and calls fn with each batch's states
// under each of them, states[i] under ps[i], the same keys in the same
// order in each (a key is reported once, with its state under every
// policy, a policy it has no counter under included). Its SCAN pattern
// is Scan's for one policy; for several, the prefix, "{*}:", the longest
// start the policies' escaped names share, and "*": the keys SCAN
// returns may then be more, and those of no policy of ps are left out,
// but the keys examined, the bound and the cost are Scan's.
func (s *Store) ScanPolicies(ctx context.Context, ps []*store.Policy, max int64, fn func([][]KeyState) error) (ScanResult, error) {
	if max < 1 {
		return ScanResult{}, errNoBound
	}
	m, err := s.matcher(ps)
	if err != nil {
		return ScanResult{}, err
	}
	nodes, err := s.scanNodes(ctx)
	if err != nil {
		return ScanResult{Pattern: m.pattern}, err
	}
	sc := &scanner{s: s, ps: ps, m: m, fn: fn, budget: max}
	res := ScanResult{Pattern: m.pattern, Complete: true}
	for _, n := range nodes {
		examined, done, err := sc.node(ctx, n)
		if err != nil {
			return ScanResult{Pattern: m.pattern}, fmt.Errorf("redisstore: scan %s: %w", n.Options().Addr, err)
		}
		res.Examined += examined
		res.Complete = res.Complete && done
	}
	return res, nil
}

// scanNodes returns the nodes a Scan visits, sorted by address: the
// server of a Client, the masters of a ClusterClient, the shards of a
// Ring.
func (s *Store) scanNodes(ctx context.Context) ([]*redis.Client, error) {
	var mu sync.Mutex
	var nodes []*redis.Client
	add := func(_ context.Context, c *redis.Client) error {
		mu.Lock()
		nodes = append(nodes, c)
		mu.Unlock()
		return nil
	}
	var err error
	switch c := s.client.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, add)
	case *redis.Ring:
		err = c.ForEachShard(ctx, add)
	case *redis.Client:
		nodes = append(nodes, c)
	default:
		err = fmt.Errorf("redisstore: scan: a %T has no nodes to scan", c)
	}
	slices.SortFunc(nodes, func(a, b *redis.Client) int { return strings.Compare(a.Options().Addr, b.Options().Addr) })
	return nodes, err
}

// scanner is one Scan: what it looks for, and what is left of its bound.
type scanner struct {
	s      *Store
	ps     []*store.Policy
	m      *keyMatcher
	fn     func([][]KeyState) error
	budget int64
	batch  []string
}

// node scans one node within the budget and reports how many keys it
// examined (its DBSIZE when its scan ended) and whether it ended.
func (sc *scanner) node(ctx context.Context, node *redis.Client) (examined int64, done bool, _ error) {
	seen := map[string]struct{}{}
	var cursor uint64
	var asked int64
	for !done && sc.budget > 0 {
		if sc.s.closed.Load() {
			return 0, false, ErrClosed
		}
		n := min(sc.budget, scanCount)
		keys, next, err := node.Scan(sc.s.callContext(ctx), cursor, sc.m.pattern, n).Result()
		if err != nil {
			return 0, false, err
		}
		sc.budget -= n
		asked += n
		for _, k := range keys {
			tag, ok := sc.m.tag(k)
			if _, dup := seen[tag]; !ok || dup {
				continue
			}
			seen[tag] = struct{}{}
			if sc.batch = append(sc.batch, tag); len(sc.batch) >= scanBatch {
				if err := sc.flush(ctx); err != nil {
					return 0, false, err
				}
			}
		}
		cursor, done = next, next == 0
	}
	examined = asked
	if done {
		size, err := node.DBSize(sc.s.callContext(ctx)).Result()
		if err != nil {
			return 0, false, err
		}
		examined = size
		sc.budget += max(asked-size, 0) // not used: the next node's
	}
	return examined, done, sc.flush(ctx)
}

// flush reads the states of the keys found and not yet reported, and
// reports them.
func (sc *scanner) flush(ctx context.Context) error {
	if len(sc.batch) == 0 {
		return nil
	}
	all := make([][]KeyState, len(sc.ps))
	for i, p := range sc.ps {
		states, err := sc.s.states(ctx, p, sc.batch)
		if err != nil {
			sc.batch = sc.batch[:0]
			return err
		}
		for j := range states {
			states[j].Key, _ = unpart(states[j].Tag)
		}
		all[i] = states
	}
	sc.batch = sc.batch[:0]
	return sc.fn(all)
}

// keyMatcher tells the keys of some policies' counters.
type keyMatcher struct {
	pattern string // SCAN's MATCH
	start   string // what every key starts with: the prefix and '{'
	// rules holds what follows "}:" in the keys of a counter; windows,
	// what follows it before ':' and a window's number.
	rules, windows map[string]bool
}

// matcher returns the matcher of the counters of ps in s.
func (s *Store) matcher(ps []*store.Policy) (*keyMatcher, error) {
	if len(ps) == 0 {
		return nil, errors.New("redisstore: scan: no policy")
	}
	m := &keyMatcher{start: s.prefix + "{", rules: map[string]bool{}, windows: map[string]bool{}}
	var common string
	for i, p := range ps {
		pl, err := s.plan(p)
		if err != nil {
			return nil, err
		}
		name := m.add(p, pl)
		if i == 0 {
			common = name
			continue
		}
		n := 0
		for n < len(name) && n < len(common) && name[n] == common[n] {
			n++
		}
		common = common[:n]
	}
	m.pattern = globEscape(s.prefix) + "{*}:" + common + "*"
	return m, nil
}

// add adds the counters of p to m and returns the start of their keys'
// rule part (after "}:") that the pattern of p alone asks for.
func (m *keyMatcher) add(p *store.Policy, pl *plan) string {
	to := m.rules
	if p.Algorithm == algo.FixedWindow || p.Calendar() {
		to = m.windows
	}
	name := part(p.Name) + "@"
	switch {
	case pl.rule == plainRule(p.Name):
		// The INCR+EXPIRE layout (a plain rule never holds '@').
		name = pl.rule + ":"
		to[pl.rule] = true
	case p.Calendar():
		// Limit i > 1 is the first's key and "." i (see calendar.lua).
		to[pl.rule] = true
		for i := 2; i <= len(p.Limits); i++ {
			to[pl.rule+"."+strconv.Itoa(i)] = true
		}
	default:
		for i := range p.Limits {
			to[ruleID(p.Name, p.CounterID(i))] = true
		}
	}
	return name
}

// tag returns the hash tag of key, when key is a counter of a policy of m.
// (An escaped name holds no ':', so a rule part that ends with ':' and a
// number is a window's and nothing else.)
func (m *keyMatcher) tag(key string) (string, bool) {
	rest, ok := strings.CutPrefix(key, m.start)
	if !ok {
		return "", false
	}
	tag, rule, ok := strings.Cut(rest, "}:")
	if !ok || strings.ContainsAny(tag, "{}") {
		return "", false
	}
	if m.rules[rule] {
		return tag, true
	}
	i := strings.LastIndexByte(rule, ':')
	return tag, i >= 0 && digits(rule[i+1:]) && m.windows[rule[:i]]
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
