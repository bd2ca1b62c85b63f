package redisstore

import (
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/rlkit/rlkit/core/algo"
	"github.com/rlkit/rlkit/core/store"
)

// maxPart is the longest escaped user or rule name kept as it is in a key;
// a longer one is replaced by its SHA-256.
const maxPart = 128

// safe reports the bytes that stand for themselves in a key part. Every other
// byte is written %XX, so no part can contain '{', '}' (the Cluster hash tag),
// ':' (the schema's separator), '%', '#' or '~' (the escapes' own markers).
var safe = func() (t [256]bool) {
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c], t[c-'a'+'A'] = true, true
	}
	for _, c := range "-._@+=/,!" {
		t[c] = true
	}
	return t
}()

// part returns s as it appears in a key. It is injective: a plain part is s
// itself; one with other bytes escapes them as %XX; the empty string is "~";
// a part longer than maxPart once escaped is "#" and the unpadded base64url
// of its SHA-256 (plain and escaped parts never start with '#' or '~').
func part(s string) string {
	if s == "" {
		return "~"
	}
	n := len(s)
	for i := 0; i < len(s); i++ {
		if !safe[s[i]] {
			n += 2
		}
	}
	switch {
	case n > maxPart:
		sum := sha256.Sum256([]byte(s))
		return "#" + base64.RawURLEncoding.EncodeToString(sum[:])
	case n == len(s):
		return s
	}
	const hex = "0123456789ABCDEF"
	b := make([]byte, 0, n)
	for i := 0; i < len(s); i++ {
		if c := s[i]; safe[c] {
			b = append(b, c)
		} else {
			b = append(b, '%', hex[c>>4], hex[c&15])
		}
	}
	return string(b)
}

// ruleID names the counter of one limit of a policy: the escaped policy
// name, '@' and the limit's counter identity (store.Policy.CounterID: the
// name, the algorithm and the limit's period) in 16 hex digits, so that a
// limit whose count or burst changes keeps its counter, and one whose
// algorithm or period changes starts another.
func ruleID(name string, counter uint64) string {
	return part(name) + "@" + hex16(counter)
}

// hex16 is x in 16 lowercase hex digits.
func hex16(x uint64) string {
	f := strconv.FormatUint(x, 16)
	return strings.Repeat("0", 16-len(f)) + f
}

// plainRule names a policy's counters in the INCR+EXPIRE layout: the
// escaped policy name, with '@' escaped too (%40), so that no such name
// is ever a ruleID, which always holds an '@'.
func plainRule(name string) string {
	return strings.ReplaceAll(part(name), "@", "%40")
}

// redisKey returns the key of limit 1 of a policy for one user:
// prefix + "{" + part(user) + "}:" + rule. Limit i > 1 has the same key
// but for the 16 hex digits at its end, its own counter identity; a fixed
// window appends ":" and the window index (the scripts do both). The
// braces are a Cluster hash tag: all of one user's counters share a slot.
func redisKey(prefix, user, rule string) string {
	return prefix + "{" + part(user) + "}:" + rule
}

// KeyNames returns the names of the Redis keys that hold the counters of
// key (a store key: core.Decision.Key, core.Event.Key) under p at the
// server time now, in the default layout (see Keys in the package
// documentation), each starting with prefix (DefaultPrefix unless the
// store was given WithPrefix): one per limit of p, in order. Limit i is
// prefix + "{" + key + "}:" + p.Name + "@" + its counter identity in 16
// hex digits (key and name escaped), then, for a fixed window, ":" and
// the index of the window holding now (now / period, in microseconds).
// A calendar limit's is the first limit's name, "." and its place (from
// 1) for a limit after the first, then ":" and the Unix second its
// period holding now starts. A sliding window's, a token bucket's and
// GCRA's keys are the same at every instant. A store with
// WithIncrExpireKeys names a one-limit fixed window's key otherwise. It
// is for tools that look a caller's counters up (GET, TTL); the store
// does not call it.
func KeyNames(prefix, key string, p *store.Policy, now time.Time) []string {
	out := make([]string, len(p.Limits))
	for i, l := range p.Limits {
		if p.Calendar() {
			k := redisKey(prefix, key, ruleID(p.Name, p.CounterID(0)))
			if i > 0 {
				k += "." + strconv.Itoa(i+1)
			}
			start := p.Periods(i, now.UnixNano()).Start
			out[i] = k + ":" + strconv.FormatInt(floorDiv(start, int64(time.Second)), 10)
			continue
		}
		k := redisKey(prefix, key, ruleID(p.Name, p.CounterID(i)))
		if p.Algorithm == algo.FixedWindow {
			k += ":" + strconv.FormatInt(floorDiv(now.UnixMicro(), l.Period.Microseconds()), 10)
		}
		out[i] = k
	}
	return out
}

// SlotsKeyName returns the name of the Redis key (a sorted set) that
// holds the slots of key (a store key) under the concurrency limit named
// name (store.Concurrency.Name: the rule's name), each starting with
// prefix: prefix + "{" + key + "}:" + name + ":inflight", key and name
// escaped. It is for tools; the store does not call it.
func SlotsKeyName(prefix, key, name string) string { return slotsKey(prefix, key, name) }

// floorDiv is a / b rounded down (b > 0).
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b < 0 {
		q--
	}
	return q
}

// unpart returns the string tag is the part of (see part), and false when
// tag is no part, or is a digest ("#…"), which names no string.
func unpart(tag string) (string, bool) {
	switch {
	case tag == "~":
		return "", true
	case tag == "" || tag[0] == '#' || len(tag) > maxPart:
		return "", false
	}
	b := make([]byte, 0, len(tag))
	for i := 0; i < len(tag); i++ {
		c := tag[i]
		if c == '%' && i+2 < len(tag) {
			hi, ok1 := unhex(tag[i+1])
			lo, ok2 := unhex(tag[i+2])
			if !ok1 || !ok2 {
				return "", false
			}
			c = hi<<4 | lo
			i += 2
		}
		b = append(b, c)
	}
	s := string(b)
	if part(s) != tag {
		return "", false // part is injective: only its own spelling of s decodes
	}
	return s, true
}

// checkTag returns an error unless tag is a hash tag the store writes: a
// part (see part), or "#" and the unpadded base64url of a SHA-256.
func checkTag(tag string) error {
	if d, ok := strings.CutPrefix(tag, "#"); ok {
		if sum, err := base64.RawURLEncoding.DecodeString(d); err == nil && len(sum) == sha256.Size && base64.RawURLEncoding.EncodeToString(sum) == d {
			return nil
		}
	} else if _, ok := unpart(tag); ok {
		return nil
	}
	return fmt.Errorf("redisstore: %q is not a key's hash tag (an escaped key, or \"#\" and the base64url of a SHA-256)", tag)
}

// unhex is the value of the uppercase hex digit c.
func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}
