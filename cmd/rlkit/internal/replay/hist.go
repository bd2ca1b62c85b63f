package replay

import (
	"math"
	"math/bits"
)

// hist is a histogram of positive counts: exact up to linearMax, and above
// it in buckets of 1/64 of a power of two (subBits), each keeping how
// many counts fell in it and their sum. A figure read from it is exact
// below linearMax; above, a percentile is the top of its bucket, high by
// less than 1/64 (1.6%) of itself and never low, and a sum over whole
// buckets is exact.
type hist struct {
	lin [linearMax]int64 // lin[v]: how many counts equal v
	n   []int64          // log buckets: how many counts
	sum []int64          // and their sum
	max int64            // the largest count
	cnt int64            // how many counts in all
	tot int64            // their sum
}

const (
	linearMax = 1024 // counts below it are kept exactly
	subBits   = 6    // 2^subBits buckets per power of two above linearMax
	linBits   = 10   // log2(linearMax)
)

// bucket returns the log bucket of v ≥ linearMax.
func bucket(v int64) int {
	e := bits.Len64(uint64(v)) - 1 // ≥ linBits
	sub := int(v>>(e-subBits)) & (1<<subBits - 1)
	return (e-linBits)<<subBits | sub
}

// bounds returns the smallest and largest count of log bucket i.
func bounds(i int) (lo, hi int64) {
	e := i>>subBits + linBits
	sub := int64(i & (1<<subBits - 1))
	w := int64(1) << (e - subBits)
	lo = (1<<subBits + sub) * w
	return lo, lo + w - 1
}

// add counts v (≥ 1) once.
func (h *hist) add(v int64) {
	if v <= 0 {
		return
	}
	h.cnt++
	h.tot += v
	h.max = max(h.max, v)
	if v < linearMax {
		h.lin[v]++
		return
	}
	i := bucket(v)
	if i >= len(h.n) {
		h.n = append(h.n, make([]int64, i+1-len(h.n))...)
		h.sum = append(h.sum, make([]int64, i+1-len(h.sum))...)
	}
	h.n[i]++
	h.sum[i] += v
}

// quantile returns the smallest count v such that at least q of the
// counts are at most v (the nearest rank: the ⌈q·n⌉-th smallest count),
// as the top of its bucket above linearMax, at most the largest count; 0
// when there is none.
func (h *hist) quantile(q float64) int64 {
	if h.cnt == 0 {
		return 0
	}
	rank := int64(math.Ceil(q * float64(h.cnt)))
	rank = min(max(rank, 1), h.cnt)
	var seen int64
	for v := int64(1); v < linearMax; v++ {
		if seen += h.lin[v]; seen >= rank {
			return v
		}
	}
	for i, n := range h.n {
		if seen += n; seen >= rank {
			_, hi := bounds(i)
			return min(hi, h.max)
		}
	}
	return h.max
}

// over returns Σ max(0, c − limit) over the counts c: the units a limit of
// limit per window would refuse, were these the counts of keys in
// windows. It is exact when no log bucket holds both counts above limit
// and counts at or below it (always when limit < linearMax); else it is
// an upper bound.
func (h *hist) over(limit int64) int64 {
	var total int64
	for v := max(limit+1, 1); v < linearMax; v++ {
		total += h.lin[v] * (v - limit)
	}
	for i, n := range h.n {
		if n == 0 {
			continue
		}
		lo, hi := bounds(i)
		switch {
		case lo > limit:
			total += h.sum[i] - n*limit
		case hi > limit:
			total += min(n*(hi-limit), h.sum[i]-n*lo) // limit within the bucket: an upper bound
		}
	}
	return total
}

// limitFor returns the smallest limit L ≥ 1 such that over(L) is at most
// share of the counts' sum, and over(L) itself.
func (h *hist) limitFor(share float64) (limit, refused int64) {
	if h.cnt == 0 {
		return 0, 0
	}
	allowed := share * float64(h.tot)
	lo, hi := int64(1), h.max // over(h.max) is 0
	for lo < hi {
		mid := lo + (hi-lo)/2
		if float64(h.over(mid)) <= allowed {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo, h.over(lo)
}

// Bucket is one bucket of a distribution: Count values from Low to High.
type Bucket struct {
	Low, High int64
	Count     int64
}

// buckets returns h's non-empty buckets in increasing order.
func (h *hist) buckets() []Bucket {
	var out []Bucket
	for v := int64(1); v < linearMax; v++ {
		if h.lin[v] > 0 {
			out = append(out, Bucket{v, v, h.lin[v]})
		}
	}
	for i, n := range h.n {
		if n > 0 {
			lo, hi := bounds(i)
			out = append(out, Bucket{lo, min(hi, h.max), n})
		}
	}
	return out
}
