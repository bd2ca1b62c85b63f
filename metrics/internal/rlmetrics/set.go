package rlmetrics

import (
	"math/bits"
	"sync"
	"sync/atomic"
	"unicode/utf8"
	"unsafe"
)

const (
	// MaxRules is the most distinct rule labels a metrics package keeps.
	MaxRules = 1000
	// OtherRule is the rule label past MaxRules, and of a name that is not
	// UTF-8. No configured rule can have this name (rule names are
	// letters, digits, '_', '.' and '-').
	OtherRule = "(other)"
	// MaxErrorKinds is the most distinct store error kinds kept.
	MaxErrorKinds = 32
	// OtherKind is the error kind past MaxErrorKinds (and core's own name
	// for an error it cannot classify).
	OtherKind = "other"
)

// DefaultBuckets are the store duration histogram's upper bounds, in
// seconds: 10 µs to 1 s, from an in-process store's call to a slow Redis
// round trip.
func DefaultBuckets() []float64 {
	return []float64{
		10e-6, 25e-6, 50e-6, 100e-6, 250e-6, 500e-6,
		1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 50e-3, 100e-3, 250e-3, 500e-3, 1,
	}
}

// A Set maps label values to a V made once per value. Get on a known value
// takes no lock and allocates nothing: the map it reads is never written;
// a new value is added to a copy, under a mutex, which then replaces it.
// At most max values get their own V; further values, and values that are
// not UTF-8, share the V of the overflow value, which is not cached under
// their names (a Get of one takes the mutex). Safe for concurrent use.
//
// Pin adds a faster way in for a few values whose strings the caller
// passes again and again, the very same strings: see Pinned.
type Set[V any] struct {
	m        atomic.Pointer[map[string]V]
	pins     atomic.Pointer[pinTable[V]]
	mu       sync.Mutex
	max      int
	overflow string
	make     func(value string) V
}

// NewSet returns a Set of at most max values and overflow, whose V are
// made by make (called under the Set's mutex, with the label value).
func NewSet[V any](max int, overflow string, make func(value string) V) *Set[V] {
	s := &Set[V]{max: max, overflow: overflow, make: make}
	s.m.Store(&map[string]V{})
	return s
}

// Get returns the V of value, made when new.
func (s *Set[V]) Get(value string) V {
	if v, ok := (*s.m.Load())[value]; ok {
		return v
	}
	return s.add(value)
}

func (s *Set[V]) add(value string) V {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := *s.m.Load()
	if v, ok := old[value]; ok {
		return v // added meanwhile
	}
	if len(old) >= s.max || !utf8.ValidString(value) {
		value = s.overflow
		if v, ok := old[value]; ok {
			return v
		}
	}
	v := s.make(value)
	next := make(map[string]V, len(old)+1)
	for k, w := range old {
		next[k] = w
	}
	next[value] = v
	s.m.Store(&next)
	return v
}

// Range calls f for every value and its V, in no order.
func (s *Set[V]) Range(f func(value string, v V)) {
	for k, v := range *s.m.Load() {
		f(k, v)
	}
}

// A pinTable finds the V of a pinned string by the address of its bytes:
// open addressing over a power-of-two array, never written once
// published. Each entry holds its string, which keeps the bytes alive, so
// no other string can have their address: the same address and length is
// the same string.
type pinTable[V any] struct {
	slots []pin[V] // an empty name is a free slot
	shift uint     // 64 - log2(len(slots))
	empty V        // the V of ""
}

type pin[V any] struct {
	name string
	v    V
}

func (t *pinTable[V]) slot(p *byte) uint64 {
	return (uint64(uintptr(unsafe.Pointer(p))) * 0x9E3779B97F4A7C15) >> t.shift
}

// Pin makes Pinned recognise each of names, and the empty string, with
// the V that Get gives it; it replaces the earlier pins.
func (s *Set[V]) Pin(names []string) {
	size := 8
	for size < 2*len(names) {
		size *= 2
	}
	t := &pinTable[V]{slots: make([]pin[V], size), shift: uint(64 - bits.TrailingZeros(uint(size))), empty: s.Get("")}
	mask := uint64(size - 1)
	for _, name := range names {
		if name == "" {
			continue
		}
		i := t.slot(unsafe.StringData(name))
		for t.slots[i].name != "" && unsafe.StringData(t.slots[i].name) != unsafe.StringData(name) {
			i = (i + 1) & mask
		}
		t.slots[i] = pin[V]{name: name, v: s.Get(name)}
	}
	s.pins.Store(t)
}

// Pinned returns the V of value when value is one of the strings of the
// last Pin — that very string, recognised by the address and length of its
// bytes, without hashing them — or is empty (and Pin was called). An equal
// string elsewhere in memory is not recognised: Get finds it.
func (s *Set[V]) Pinned(value string) (v V, ok bool) {
	t := s.pins.Load()
	if t == nil {
		return v, false
	}
	if len(value) == 0 {
		return t.empty, true
	}
	p := unsafe.StringData(value)
	mask := uint64(len(t.slots) - 1)
	for i := t.slot(p); ; i = (i + 1) & mask {
		e := &t.slots[i]
		if e.name == "" {
			return v, false
		}
		if unsafe.StringData(e.name) == p && len(e.name) == len(value) {
			return e.v, true
		}
	}
}
