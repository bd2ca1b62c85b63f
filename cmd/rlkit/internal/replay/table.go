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
// window (peaks), per limit. A request counts in the window of its own
// time stamp, whatever the replay's clock reads. Keys are held by a
// 64-bit hash of their own (hash/maphash, seeded at random), not as
// strings. Two keys whose hashes are equal would count as one; among ten
// million keys the chance that any two do is about 3 in a million.
//
// A key's entry is a run of int64s in pages that never move (see ent):
// its hash, then per limit two windows, each an id and a count (the
// earlier first; a count of 0 is no window), and the most it counted in
// any window; an index (see index.go) finds the entry of a hash. Holding
// two windows lets a request logged out of order count in its own window
// when that is one of the key's last two: a request in a window later
// than both ends the earlier one (its count is final: it goes into
// counts), and so does one between them, taking its place; one earlier
// than both, whose window's count may be final already, counts in the
// earlier of the two (displaced). A key costs 8 bytes, 40 per limit and
// 16 to 32 of index: 64 to 80 bytes for a rule of one limit.
//
// It holds at most max keys. When full, one pass frees a tenth of it:
// first keys whose every window has ended by the time stamp of the
// request that needs room (forgetting such a key changes no per-window
// count unless a request of an ended window comes after it; the key, seen
// again, counts as another key in peaks), then, if those are too few, the
// keys with the least counted in their open windows, each of which splits
// a window's count in two (split).
type keyTable struct {
	seed      maphash.Seed
	idx       []uint64  // the index: see index.go
	n         int       // the keys held
	pages     [][]int64 // the entries, pageEntries a page
	stride    int       // an entry's int64s: 1 + 5 per limit
	made      int32     // the entries made
	free      []int32   // entries made and free
	nl        int
	max       int
	windows   []window
	counts    []hist  // per limit: per-key-window counts
	peaks     []hist  // per limit: per-key peaks
	displaced []int64 // per limit: units counted in a later window than their own
	evicted   int64   // keys forgotten to stay within max
	split     int64   // of those, the ones forgotten while a window was open
	most      int     // the most keys held at once
}

// pageBits sets the entries of a page: 4,096.
const (
	pageBits    = 12
	pageEntries = 1 << pageBits
)

// Offsets in an entry: the hash, then per limit j, at 1+limitInts*j, its
// earlier window's id and count, its later window's id and count, and its
// peak.
const (
	entHash   = 0
	winOldID  = 0
	winOldCnt = 1
	winID     = 2
	winCnt    = 3
	winPeak   = 4
	limitInts = 5
)

func newKeyTable(windows []window, maxKeys int) *keyTable {
	return &keyTable{
		seed:      maphash.MakeSeed(),
		nl:        len(windows),
		stride:    1 + limitInts*len(windows),
		max:       max(maxKeys, 1),
		windows:   windows,
		counts:    make([]hist, len(windows)),
		peaks:     make([]hist, len(windows)),
		displaced: make([]int64, len(windows)),
	}
}

// ent returns entry e.
func (t *keyTable) ent(e int32) []int64 {
	p := t.pages[e>>pageBits]
	o := int(e&(pageEntries-1)) * t.stride
	return p[o : o+t.stride : o+t.stride]
}

// lim returns limit j's part of entry en.
func lim(en []int64, j int) []int64 {
	o := 1 + limitInts*j
	return en[o : o+limitInts : o+limitInts]
}

// add counts units (> 0) for key, asked for at instant at (the request's
// own time stamp).
func (t *keyTable) add(key string, units, at int64) {
	h := fix(maphash.String(t.seed, key))
	e, slot := t.find(h)
	if e < 0 {
		e = t.insert(h, slot, at)
	}
	en := t.ent(e)
	for j := range t.nl {
		w := lim(en, j)
		id := t.windows[j].id(at)
		var c *int64
		switch {
		case w[winCnt] == 0 || id == w[winID]: // a new key's first window, or the later one
			w[winID], c = id, &w[winCnt]
		case id > w[winID]: // a later window: the earlier one ends
			t.counts[j].add(w[winOldCnt])
			w[winOldID], w[winOldCnt] = w[winID], w[winCnt]
			w[winID], w[winCnt] = id, 0
			c = &w[winCnt]
		case w[winOldCnt] != 0 && id == w[winOldID]:
			c = &w[winOldCnt]
		case w[winOldCnt] == 0 || id > w[winOldID]: // between the two: the earlier one ends
			t.counts[j].add(w[winOldCnt])
			w[winOldID], w[winOldCnt] = id, 0
			c = &w[winOldCnt]
		default: // earlier than both
			c = &w[winOldCnt]
			t.displaced[j] += units
		}
		*c += units
		w[winPeak] = max(w[winPeak], *c)
	}
}

// insert makes the entry of the key of hash h, which is not held, and
// returns it; slot is the index's empty slot find gave for h; at is the
// time stamp of the request that needs it.
func (t *keyTable) insert(h uint64, slot int, at int64) int32 {
	if t.n >= t.max {
		t.evict(at)
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
	clear(en)
	en[entHash] = int64(h)
	if slot < 0 {
		_, slot = t.find(h)
	}
	t.idx[slot] = slotOf(h, e)
	t.n++
	t.most = max(t.most, t.n)
	return e
}

// evict frees a tenth of the table (see keyTable); now is the time stamp
// the windows that have ended are told by.
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
			w := lim(en, j)
			if w[winCnt] > 0 && w[winID] >= cur[j] || w[winOldCnt] > 0 && w[winOldID] >= cur[j] {
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
			w := lim(en, j)
			if w[winOldID] >= cur[j] {
				s += w[winOldCnt]
			}
			if w[winID] >= cur[j] {
				s += w[winCnt]
			}
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
	t.final(en)
	t.del(uint64(en[entHash]), e)
	en[entHash] = 0
	t.free = append(t.free, e)
	t.evicted++
	if open {
		t.split++
	}
}

// final counts the windows and peaks of entry en into the distributions.
func (t *keyTable) final(en []int64) {
	for j := range t.nl {
		w := lim(en, j)
		t.counts[j].add(w[winOldCnt]) // hist.add counts nothing for 0
		t.counts[j].add(w[winCnt])
		t.peaks[j].add(w[winPeak])
	}
}

// finish counts every key still held into the distributions, once, at
// the end of the log.
func (t *keyTable) finish() {
	for e := range t.made {
		if en := t.ent(e); en[entHash] != 0 {
			t.final(en)
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
