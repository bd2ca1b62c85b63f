package redisstore

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlkit/rlkit/core/algo"
	"github.com/rlkit/rlkit/core/store"
)

func TestPart(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"alice", "alice"},
		{"user:42", "user%3A42"},
		{"a}b{c", "a%7Db%7Bc"},
		{"", "~"},
		{"~", "%7E"},
		{"#x", "%23x"},
		{"100%", "100%25"},
		{"a b", "a%20b"},
		{"a\x00b", "a%00b"},
		{"ユ", "%E3%83%A6"},
		{"sha256:ab", "sha256%3Aab"},
		{"x@y.com/+=,!-_.", "x@y.com/+=,!-_."},
		{strings.Repeat("a", 128), strings.Repeat("a", 128)},
		{strings.Repeat("a", 129), "#wSywJKLlVRzKDgj86PHF4xRVXMP-9jKe6ZSj23UhZq4"},
		{strings.Repeat(":", 42), strings.Repeat("%3A", 42)},                      // 126 bytes escaped
		{strings.Repeat(":", 43), "#u8yljAHTXUM6zyvDSUZD-876fOUG-0uYC7lah-40Kzo"}, // 129
	} {
		if got := part(c.in); got != c.want {
			t.Errorf("part(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// FuzzPart checks that part is injective and never yields a byte that
// could break the key schema or the hash tag.
func FuzzPart(f *testing.F) {
	for _, s := range []string{"", "a", "a:b", "{x}", "%41", "~", "#", strings.Repeat("z", 200)} {
		f.Add(s, s+"x")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		pa, pb := part(a), part(b)
		if (a == b) != (pa == pb) {
			t.Fatalf("part(%q) = %q, part(%q) = %q", a, pa, b, pb)
		}
		if strings.ContainsAny(pa, "{}: \x00") || len(pa) > maxPart || pa == "" {
			t.Fatalf("part(%q) = %q", a, pa)
		}
		// unpart inverts part, but for a digest; and reads nothing else.
		if got, ok := unpart(pa); ok != (pa[0] != '#') || ok && got != a {
			t.Fatalf("unpart(part(%q)) = %q, %v", a, got, ok)
		}
		if got, ok := unpart(a); ok && part(got) != a {
			t.Fatalf("unpart(%q) = %q, which part writes %q", a, got, part(got))
		}
	})
}

// TestUnpart: unpart reads a key's hash tag back into the key, and reads
// no other spelling of it.
func TestUnpart(t *testing.T) {
	for _, c := range []struct {
		in, want string
		ok       bool
	}{
		{"alice", "alice", true},
		{"user%3A42", "user:42", true},
		{"u%3Abob%7Cp%3Ak%7B1%7D", "u:bob|p:k{1}", true},
		{"~", "", true},
		{"%7E", "~", true},
		{"%E3%83%A6", "ユ", true},
		{"#wSywJKLlVRzKDgj86PHF4xRVXMP-9jKe6ZSj23UhZq4", "", false}, // a digest
		{"user%3a42", "", false},                                    // lower-case hex: not part's
		{"%41", "", false},                                          // 'A' is written as it is
		{"a%3", "", false},
		{"a%", "", false},
		{"a:b", "", false},
		{"", "", false},
	} {
		if got, ok := unpart(c.in); got != c.want || ok != c.ok {
			t.Errorf("unpart(%q) = %q, %v; want %q, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

// TestKeyMatcher: Scan's pattern and the keys it keeps: a policy's
// counters (every limit, every window), not those of its other terms,
// other policies, a plan's variant or slots in flight.
func TestKeyMatcher(t *testing.T) {
	two := &store.Policy{Name: "search", Algorithm: algo.FixedWindow, Limits: []algo.Limit{{Count: 2, Period: time.Second}, {Count: 100, Period: time.Hour}}}
	id1, id2 := hex16(two.CounterID(0)), hex16(two.CounterID(1))
	gcra := &store.Policy{Name: "up*load", Algorithm: algo.GCRA, Limits: []algo.Limit{{Count: 5, Period: time.Minute}}}
	gid := hex16(gcra.CounterID(0))
	other := &store.Policy{Name: "search", Algorithm: algo.FixedWindow, Limits: []algo.Limit{{Count: 2, Period: time.Minute}}}
	for _, c := range []struct {
		p       *store.Policy
		prefix  string
		pattern string
		keys    map[string]string // key → tag, "" for a key left out
	}{
		{two, "rl:", "rl:{*}:search@*", map[string]string{
			"rl:{alice}:search@" + id1 + ":1796532478":              "alice",
			"rl:{sub%3Abob}:search@" + id2 + ":499036":              "sub%3Abob",
			"rl:{alice}:search@" + id1:                              "", // no window
			"rl:{alice}:search@" + id1 + ":x":                       "",
			"rl:{alice}:search@" + hex16(other.CounterID(0)) + ":1": "", // another period
			"rl:{alice}:search@pro@" + id1 + ":1":                   "", // a plan's variant
			"rl:{alice}:search:inflight":                            "",
			"app:{alice}:search@" + id1 + ":1":                      "",
			"rl:{a{b}:search@" + id1 + ":1":                         "",
		}},
		{gcra, "my[app]:", `my\[app\]:{*}:up%2Aload@*`, map[string]string{
			"my[app]:{~}:up%2Aload@" + gid:        "~",
			"my[app]:{~}:up%2Aload@" + gid + ":1": "",
		}},
	} {
		s := &Store{prefix: c.prefix}
		m, err := s.matcher([]*store.Policy{c.p})
		if err != nil {
			t.Fatal(err)
		}
		if m.pattern != c.pattern {
			t.Errorf("%s: pattern %q, want %q", c.p.Name, m.pattern, c.pattern)
		}
		for k, want := range c.keys {
			if tag, ok := m.tag(k); ok != (want != "") || tag != want && ok {
				t.Errorf("%s: tag(%q) = %q, %v; want %q", c.p.Name, k, tag, ok, want)
			}
		}
	}
	// The INCR+EXPIRE layout: the name alone, and a window.
	one := &store.Policy{Name: "a@b", Algorithm: algo.FixedWindow, Limits: []algo.Limit{{Count: 2, Period: time.Second}}}
	m, _ := (&Store{prefix: "rl:", incrExpire: true}).matcher([]*store.Policy{one})
	if tag, ok := m.tag("rl:{alice}:a%40b:1764604800"); m.pattern != "rl:{*}:a%40b:*" || !ok || tag != "alice" {
		t.Errorf("INCR+EXPIRE layout: pattern %q, tag %q, %v", m.pattern, tag, ok)
	}
	if _, ok := m.tag("rl:{alice}:a%40b:inflight"); ok {
		t.Errorf("INCR+EXPIRE layout: slots in flight taken for a counter")
	}
	// Several policies: a pattern covering them all, and the keys of each.
	up := &store.Policy{Name: "upload", Algorithm: algo.GCRA, Limits: []algo.Limit{{Count: 2, Period: time.Hour}}}
	ban := &store.Policy{Name: "upload!ban", Algorithm: algo.GCRA, Limits: []algo.Limit{{Count: 1, Period: time.Hour, Burst: 1}}}
	day := &store.Policy{Name: "uploads", Algorithm: algo.FixedWindow, Limits: []algo.Limit{{Count: 9, Period: 24 * time.Hour}}}
	denials := &store.Policy{Name: "upload!denials", Algorithm: algo.SlidingWindow, Limits: []algo.Limit{{Count: 2, Period: time.Hour}}}
	m, err := (&Store{prefix: "rl:"}).matcher([]*store.Policy{up, ban, day})
	if err != nil || m.pattern != "rl:{*}:upload*" {
		t.Fatalf("upload, upload!ban, uploads: pattern %q, %v; want rl:{*}:upload*", m.pattern, err)
	}
	for k, want := range map[string]string{
		"rl:{alice}:upload@" + hex16(up.CounterID(0)):              "alice",
		"rl:{bob}:upload!ban@" + hex16(ban.CounterID(0)):           "bob",
		"rl:{carol}:uploads@" + hex16(day.CounterID(0)) + ":20000": "carol",
		"rl:{carol}:uploads@" + hex16(day.CounterID(0)):            "", // no window
		"rl:{alice}:upload@" + hex16(up.CounterID(0)) + ":1":       "", // a window of a policy that has none
		"rl:{dave}:upload!denials@" + hex16(denials.CounterID(0)):  "",
	} {
		if tag, ok := m.tag(k); ok != (want != "") || tag != want && ok {
			t.Errorf("several policies: tag(%q) = %q, %v; want %q", k, tag, ok, want)
		}
	}
	if _, err := (&Store{prefix: "rl:"}).matcher(nil); err == nil {
		t.Errorf("no policy: no error")
	}
}

// TestCheckTag: the hash tags InspectTags, ResetTag and InFlightTag
// take: an escaped key or a digest, nothing else.
func TestCheckTag(t *testing.T) {
	long := strings.Repeat("é", 40)
	for tag, ok := range map[string]bool{
		"alice":              true,
		"ip%3A192.0.2.1":     true,
		"~":                  true,
		part(long):           true, // "#" and a digest
		"ip:192.0.2.1":       false,
		"a{b":                false,
		"":                   false,
		"#abc":               false,
		part(long) + "x":     false,
		"#" + part(long)[2:]: false,
		"%7Balice":           true,
		"%7balice":           false, // not part's own spelling
	} {
		if err := checkTag(tag); (err == nil) != ok {
			t.Errorf("checkTag(%q) = %v, want ok %v", tag, err, ok)
		}
	}
}

// TestPlainRule: a rule's name in the INCR+EXPIRE layout is the name as
// part writes it, '@' escaped too, so that it never equals a ruleID of
// the default layout (which always holds an '@').
func TestPlainRule(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"search", "search"},
		{"a@b", "a%40b"},
		{"api@00000000deadbeef", "api%4000000000deadbeef"},
		{"a:b", "a%3Ab"},
		{"", "~"},
	} {
		if got := plainRule(c.in); got != c.want {
			t.Errorf("plainRule(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	if id := ruleID("api", 0xdeadbeef); plainRule("api@00000000deadbeef") == id || !strings.Contains(id, "@") {
		t.Fatalf("ruleID %q meets the plain rule of the same text", id)
	}
}

func TestUnitFor(t *testing.T) {
	for _, c := range []struct {
		a     algo.Algorithm
		limit algo.Limit
		want  int64
		err   string
	}{
		{algo.SlidingWindow, algo.Limit{Count: 10, Period: time.Second}, 1, ""},
		{algo.GCRA, algo.Limit{Count: 17_000, Period: 24 * time.Hour}, 1, ""},
		{algo.GCRA, algo.Limit{Count: 18_000, Period: 24 * time.Hour}, 10, ""},
		{algo.TokenBucket, algo.Limit{Count: 416_000, Period: time.Hour}, 1, ""},
		{algo.TokenBucket, algo.Limit{Count: 418_000, Period: time.Hour}, 10, ""},
		{algo.TokenBucket, algo.Limit{Count: 25_000_000, Period: time.Minute}, 1, ""},
		{algo.GCRA, algo.Limit{Count: 100, Period: 24 * time.Hour}, 1, ""},
		{algo.TokenBucket, algo.Limit{Count: 1_000_000, Period: 24 * time.Hour}, 100, ""},
		{algo.TokenBucket, algo.Limit{Count: 10, Period: 24 * time.Hour, Burst: 1 << 30}, 100_000, ""},
		{algo.SlidingWindow, algo.Limit{Count: 1_000_000, Period: time.Second}, 1, ""},
		{algo.SlidingWindow, algo.Limit{Count: 20_000_000, Period: time.Hour}, 100, ""},
		{algo.SlidingWindow, algo.Limit{Count: 1, Period: 1500 * time.Nanosecond}, 0, "whole number of microseconds"},
		{algo.SlidingWindow, algo.Limit{Count: 2_000_000, Period: time.Second}, 1, ""},
		{algo.GCRA, algo.Limit{Count: 100_000_000, Period: time.Hour}, 1000, ""},
		{algo.GCRA, algo.Limit{Count: 1 << 30, Period: 24 * time.Hour}, 100_000, ""},
		{algo.GCRA, algo.Limit{Count: 1 << 30, Period: 24*time.Hour + time.Microsecond}, 0, "too many units"},
	} {
		u, err := unitFor(c.a, c.limit)
		if u != c.want || (err == nil) != (c.err == "") || err != nil && !strings.Contains(err.Error(), c.err) {
			t.Errorf("unitFor(%v, %v) = %d, %v; want %d, %q", c.a, c.limit, u, err, c.want, c.err)
		}
	}
}

func TestNewErrors(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer c.Close()
	for _, tc := range []struct {
		opts []Option
		want string
	}{
		{[]Option{WithPrefix("rl:{x}:")}, `redisstore: prefix "rl:{x}:" contains '{' or '}', which would break the Cluster hash tag`},
		{[]Option{WithTimeout(0)}, "redisstore: timeout 0s must be positive"},
		{[]Option{WithBreaker(3, 0)}, "redisstore: breaker cool-down 0s must be positive"},
		{[]Option{WithDenyCacheSize(0)}, "redisstore: deny cache size 0 must be positive"},
	} {
		if _, err := New(c, tc.opts...); err == nil || err.Error() != tc.want {
			t.Errorf("got %v, want %q", err, tc.want)
		}
	}
	if _, err := New(nil); err == nil || err.Error() != "redisstore: nil client" {
		t.Errorf("New(nil): %v", err)
	}
	if _, err := New(c, WithBreaker(0, 0), WithDenyCache(false), WithDenyCacheSize(0)); err != nil {
		t.Errorf("breaker and deny cache off: %v", err)
	}
}

func TestBadPolicy(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer c.Close()
	s, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		p    *store.Policy
		want string
	}{
		{&store.Policy{Name: "none"}, `redisstore: policy "none" has 0 limits: rate-limit policy needs 1 to 4 limits`},
		{&store.Policy{Name: "ns", Limits: []algo.Limit{{Count: 1, Period: 1500}}},
			`redisstore: policy "ns": limit 1/1.5µs: the period must be a whole number of microseconds (the Redis clock's resolution): rate-limit policy needs 1 to 4 limits`},
		{&store.Policy{Name: "zero", Limits: []algo.Limit{{Count: 0, Period: time.Second}}},
			`redisstore: policy "zero": count 0 out of range [1, 2147483647]: rate-limit policy needs 1 to 4 limits`},
	} {
		_, err := s.Take(t.Context(), "u", tc.p, 1)
		if !errors.Is(err, store.ErrBadPolicy) || err.Error() != tc.want {
			t.Errorf("Take under %+v:\ngot  %v\nwant %s", tc.p, err, tc.want)
		}
	}
}
