package replay

import (
	"cmp"
	"hash/maphash"
	"slices"
	"strings"

	"github.com/rlkit/rlkit/core/store"
)

// window says how one limit's windows are cut: fixed windows of the
// limit's period aligned on the Unix epoch, floor(now / period), as the
// fixed-window algorithm aligns them (package algo), or, for a calendar
// limit, the calendar periods of its policy's time zone.
type window struct {
	period int64         // nanoseconds
	policy *store.Policy // for a calendar limit
	limit  int           // the limit's index in policy
}

// id names the window that holds now: its index, or a calendar period's
// start.
func (w *window) id(now int64) int64 {
	if w.policy != nil {
		return w.policy.Periods(w.limit, now).Start
	}
	return now / w.period
}

// keyTable counts what each key of one rule asks for in each window of
// each of the rule's limits, for the recommendations: the distribution of
// per-key-window counts (counts) and of each key's highest count in any
// window (peaks), per limit. Keys are held by a 64-bit hash of their own
// (hash/maphash, seeded at random), not as strings. Two keys whose hashes
// are equal would count as one; among ten million keys the chance that
// any two do is about 3 in a million.
//
// A key's entry is a run of int64s in pages that never move (see ent):
// its hash, then per limit its current window's id, its count there and
// the most it counted in any window; an index (see index.go) finds the
// entry of a hash. A key costs 8 bytes, 24 per limit and 16 to 32 of
// index: 48 to 64 bytes for a rule of one limit.
//
// It holds at most max keys. When full, one pass frees a tenth of it:
// first keys whose every window has ended (a window's count is final once
// it ends, so forgetting such a key changes no per-window count; the key,
// seen again, counts as another key in peaks), then, if those are too
// few, the keys with the least counted in their open windows, each of
// which splits a window's count in two (split).
type keyTable struct {
	seed    maphash.Seed
	idx     []uint64  // the index: see index.go
	n       int       // the keys held
	pages   [][]int64 // the entries, pageEntries a page
	stride  int       // an entry's int64s: 1 + 3 per limit
	made    int32     // the entries made
	free    []int32   // entries made and free
	nl      int
	max     int
	windows []window
	counts  []hist // per limit: per-key-window counts
	peaks   []hist // per limit: per-key peaks
	evicted int64  // keys forgotten to stay within max
	split   int64  // of those, the ones forgotten while a window was open
	most    int    // the most keys held at once
}

// pageBits sets the entries of a page: 4,096.
const (
	pageBits    = 12
	pageEntries = 1 << pageBits
)

// Offsets in an entry: the hash, then per limit j at 1+3j its window's
// id, its count there and its peak.
const (
	entHash = 0
	winID   = 0
	winCnt  = 1
	winPeak = 2
)

func newKeyTable(windows []window, maxKeys int) *keyTable {
	return &keyTable{
		seed:    maphash.MakeSeed(),
		nl:      len(windows),
		stride:  1 + 3*len(windows),
		max:     max(maxKeys, 1),
		windows: windows,
		counts:  make([]hist, len(windows)),
		peaks:   make([]hist, len(windows)),
	}
}

// ent returns entry e.
func (t *keyTable) ent(e int32) []int64 {
	p := t.pages[e>>pageBits]
	o := int(e&(pageEntries-1)) * t.stride
	return p[o : o+t.stride : o+t.stride]
}

// add counts units (> 0) for key at instant now.
func (t *keyTable) add(key string, units, now int64) {
	h := fix(maphash.String(t.seed, key))
	e, slot := t.find(h)
	if e < 0 {
		e = t.insert(h, slot, now)
	}
	en := t.ent(e)
	for j := range t.nl {
		w := en[1+3*j : 4+3*j : 4+3*j]
		if id := t.windows[j].id(now); w[winID] != id {
			t.counts[j].add(w[winCnt])
			w[winID], w[winCnt] = id, 0
		}
		w[winCnt] += units
		w[winPeak] = max(w[winPeak], w[winCnt])
	}
}

// insert makes the entry of the key of hash h, which is not held, and
// returns it; slot is the index's empty slot find gave for h.
func (t *keyTable) insert(h uint64, slot int, now int64) int32 {
	if t.n >= t.max {
		t.evict(now)
		slot = -1
	}
	if 2*(t.n+1) > len(t.idx) {
		t.grow()
		slot = -1
	}
	var e int32
	if n := len(t.free); n > 0 {
		e = t.free[n-1]
		t.free = t.free[:n-1]
	} else {
		e = t.made
		if int(e>>pageBits) == len(t.pages) {
			t.pages = append(t.pages, make([]int64, pageEntries*t.stride))
		}
		t.made++
	}
	en := t.ent(e)
	en[entHash] = int64(h)
	for j := range t.nl {
		w := en[1+3*j : 4+3*j : 4+3*j]
		w[winID], w[winCnt], w[winPeak] = t.windows[j].id(now), 0, 0
	}
	if slot < 0 {
		_, slot = t.find(h)
	}
	t.idx[slot] = slotOf(h, e)
	t.n++
	t.most = max(t.most, t.n)
	return e
}

// evict frees a tenth of the table (see keyTable).
func (t *keyTable) evict(now int64) {
	target := max(t.max/10, 1)
	cur := make([]int64, t.nl)
	for j := range cur {
		cur[j] = t.windows[j].id(now)
	}
	var open []int32
	freed := 0
	for e := range t.made {
		if freed >= target {
			break
		}
		en := t.ent(e)
		if en[entHash] == 0 {
			continue
		}
		closed := true
		for j := range t.nl {
			if en[1+3*j+winID] == cur[j] && en[1+3*j+winCnt] > 0 {
				closed = false
			}
		}
		if closed {
			t.drop(e, false)
			freed++
		} else {
			open = append(open, e)
		}
	}
	if freed >= target {
		return
	}
	// Too few ended: the keys with the least in their open windows go.
	total := func(e int32) int64 {
		var s int64
		en := t.ent(e)
		for j := range t.nl {
			s += en[1+3*j+winCnt]
		}
		return s
	}
	slices.SortFunc(open, func(a, b int32) int { return cmp.Compare(total(a), total(b)) })
	for _, e := range open[:min(len(open), target-freed)] {
		t.drop(e, true)
	}
}

// drop forgets entry e, counting what it held into the distributions.
func (t *keyTable) drop(e int32, open bool) {
	en := t.ent(e)
	for j := range t.nl {
		t.counts[j].add(en[1+3*j+winCnt])
		t.peaks[j].add(en[1+3*j+winPeak])
	}
	t.del(uint64(en[entHash]), e)
	en[entHash] = 0
	t.free = append(t.free, e)
	t.evicted++
	if open {
		t.split++
	}
}

// finish counts every key still held into the distributions, once, at
// the end of the log.
func (t *keyTable) finish() {
	for e := range t.made {
		en := t.ent(e)
		if en[entHash] == 0 {
			continue
		}
		for j := range t.nl {
			t.counts[j].add(en[1+3*j+winCnt])
			t.peaks[j].add(en[1+3*j+winPeak])
		}
	}
	t.idx, t.pages, t.free, t.made, t.n = nil, nil, nil, 0, 0
}

// topK finds the keys refused most with the Space-Saving algorithm
// (Metwally, Agrawal and El Abbadi, 2005) in at most cap entries: a key
// not held takes the place of the one with the least count, inheriting
// that count as its possible error. Every key refused more than N/cap
// times (N refusals in all) is held, and each held count is high by at
// most its error; all are exact while no more than cap keys were refused.
type topK struct {
	cap int
	idx map[string]int
	h   []KeyCount // a min-heap by Refused
}

// KeyCount is a key and how many of its requests a rule would refuse:
// Refused, which may be high by at most Error (0: exact).
type KeyCount struct {
	Key     string `json:"key"`
	Refused int64  `json:"refused"`
	Error   int64  `json:"error"`
}

func newTopK(n int) *topK { return &topK{cap: max(n, 1), idx: map[string]int{}} }

func (t *topK) add(key string) {
	if i, ok := t.idx[key]; ok {
		t.h[i].Refused++
		t.down(i)
		return
	}
	if len(t.h) < t.cap {
		k := strings.Clone(key)
		t.h = append(t.h, KeyCount{Key: k, Refused: 1})
		t.idx[k] = len(t.h) - 1
		t.up(len(t.h) - 1)
		return
	}
	m := &t.h[0]
	delete(t.idx, m.Key)
	k := strings.Clone(key)
	*m = KeyCount{Key: k, Refused: m.Refused + 1, Error: m.Refused}
	t.idx[k] = 0
	t.down(0)
}

func (t *topK) less(i, j int) bool { return t.h[i].Refused < t.h[j].Refused }

func (t *topK) swap(i, j int) {
	t.h[i], t.h[j] = t.h[j], t.h[i]
	t.idx[t.h[i].Key], t.idx[t.h[j].Key] = i, j
}

func (t *topK) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !t.less(i, p) {
			return
		}
		t.swap(i, p)
		i = p
	}
}

func (t *topK) down(i int) {
	for {
		l, s := 2*i+1, i
		if l < len(t.h) && t.less(l, s) {
			s = l
		}
		if r := l + 1; r < len(t.h) && t.less(r, s) {
			s = r
		}
		if s == i {
			return
		}
		t.swap(i, s)
		i = s
	}
}

// top returns the n keys refused most, most first (ties by key).
func (t *topK) top(n int) []KeyCount {
	out := slices.Clone(t.h)
	slices.SortFunc(out, func(a, b KeyCount) int {
		if c := cmp.Compare(b.Refused, a.Refused); c != 0 {
			return c
		}
		return strings.Compare(a.Key, b.Key)
	})
	return out[:min(n, len(out))]
}
