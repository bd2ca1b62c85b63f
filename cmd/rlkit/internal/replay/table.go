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

// winState is one key's count in its current window of one limit, and the
// most it counted in any window.
type winState struct{ id, cnt, peak int64 }

// keyTable counts what each key of one rule asks for in each window of
// each of the rule's limits, for the recommendations: the distribution of
// per-key-window counts (counts) and of each key's highest count in any
// window (peaks), per limit. Keys are held by a 64-bit hash of their own
// (hash/maphash, seeded at random), not as strings: at most about 80
// bytes a key, the index (hashIndex) included.
// Two keys whose hashes are equal would count as one; among ten million
// keys the chance that any two do is about 3 in a million.
//
// It holds at most max keys. When full, one pass frees a tenth of it:
// first keys whose every window has ended (a window's count is final once
// it ends, so forgetting such a key changes no per-window count; the key,
// seen again, counts as another key in peaks), then, if those are too
// few, the keys with the least counted in their open windows, each of
// which splits a window's count in two (split).
type keyTable struct {
	seed    maphash.Seed
	idx     hashIndex
	hashes  []uint64 // per entry
	used    []bool
	wins    []winState // nl per entry
	free    []int32
	nl      int
	max     int
	windows []window
	counts  []hist // per limit: per-key-window counts
	peaks   []hist // per limit: per-key peaks
	evicted int64  // keys forgotten to stay within max
	split   int64  // of those, the ones forgotten while a window was open
	most    int    // the most keys held at once
}

func newKeyTable(windows []window, maxKeys int) *keyTable {
	return &keyTable{
		seed:    maphash.MakeSeed(),
		nl:      len(windows),
		max:     max(maxKeys, 1),
		windows: windows,
		counts:  make([]hist, len(windows)),
		peaks:   make([]hist, len(windows)),
	}
}

// add counts units (> 0) for key at instant now.
func (t *keyTable) add(key string, units, now int64) {
	h := maphash.String(t.seed, key)
	i, ok := t.idx.get(h)
	if !ok {
		i = t.insert(h, now)
	}
	ws := t.wins[int(i)*t.nl : int(i+1)*t.nl]
	for j := range ws {
		w := &ws[j]
		if id := t.windows[j].id(now); w.id != id {
			t.counts[j].add(w.cnt)
			w.id, w.cnt = id, 0
		}
		w.cnt += units
		w.peak = max(w.peak, w.cnt)
	}
}

// insert makes room for the key of hash h if need be and returns its new
// entry.
func (t *keyTable) insert(h uint64, now int64) int32 {
	if t.idx.n >= t.max {
		t.evict(now)
	}
	var i int32
	if n := len(t.free); n > 0 {
		i = t.free[n-1]
		t.free = t.free[:n-1]
	} else {
		i = int32(len(t.hashes))
		t.hashes = append(t.hashes, 0)
		t.used = append(t.used, false)
		t.wins = append(t.wins, make([]winState, t.nl)...)
	}
	t.hashes[i], t.used[i] = h, true
	ws := t.wins[int(i)*t.nl : int(i+1)*t.nl]
	for j := range ws {
		ws[j] = winState{id: t.windows[j].id(now)}
	}
	t.idx.put(h, i)
	t.most = max(t.most, t.idx.n)
	return i
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
	for i := range t.hashes {
		if freed >= target {
			break
		}
		if !t.used[i] {
			continue
		}
		closed := true
		for j, w := range t.wins[i*t.nl : (i+1)*t.nl] {
			if w.id == cur[j] && w.cnt > 0 {
				closed = false
			}
		}
		if closed {
			t.drop(int32(i), false)
			freed++
		} else {
			open = append(open, int32(i))
		}
	}
	if freed >= target {
		return
	}
	// Too few ended: the keys with the least in their open windows go.
	total := func(i int32) int64 {
		var s int64
		for _, w := range t.wins[int(i)*t.nl : int(i+1)*t.nl] {
			s += w.cnt
		}
		return s
	}
	slices.SortFunc(open, func(a, b int32) int { return cmp.Compare(total(a), total(b)) })
	for _, i := range open[:min(len(open), target-freed)] {
		t.drop(i, true)
	}
}

// drop forgets entry i, counting what it held into the distributions.
func (t *keyTable) drop(i int32, open bool) {
	for j, w := range t.wins[int(i)*t.nl : int(i+1)*t.nl] {
		t.counts[j].add(w.cnt)
		t.peaks[j].add(w.peak)
	}
	t.idx.del(t.hashes[i])
	t.used[i] = false
	t.free = append(t.free, i)
	t.evicted++
	if open {
		t.split++
	}
}

// finish counts every key still held into the distributions, once, at
// the end of the log.
func (t *keyTable) finish() {
	for i := range t.hashes {
		if t.used[i] {
			for j, w := range t.wins[i*t.nl : (i+1)*t.nl] {
				t.counts[j].add(w.cnt)
				t.peaks[j].add(w.peak)
			}
		}
	}
	t.idx, t.hashes, t.used, t.wins, t.free = hashIndex{}, nil, nil, nil, nil
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
