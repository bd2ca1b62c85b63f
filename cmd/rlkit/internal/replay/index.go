package replay

// hashIndex maps 64-bit key hashes to entries of a keyTable: open
// addressing with linear probing, at most half full, and deletion by
// shifting back the entries after the freed slot, so that no tombstone is
// left behind and lookups stay short however many keys come and go. The
// hash 0 is stored as 1.
type hashIndex struct {
	slots []uint64 // a hash, 0 for none
	ents  []int32  // the entry of each slot's hash
	n     int
}

func fix(h uint64) uint64 {
	if h == 0 {
		return 1
	}
	return h
}

func (x *hashIndex) mask() uint64 { return uint64(len(x.slots) - 1) }

// get returns the entry of h.
func (x *hashIndex) get(h uint64) (int32, bool) {
	if x.n == 0 {
		return 0, false
	}
	h = fix(h)
	m := x.mask()
	for i := h & m; ; i = (i + 1) & m {
		switch x.slots[i] {
		case h:
			return x.ents[i], true
		case 0:
			return 0, false
		}
	}
}

// put sets the entry of h, which is not in x.
func (x *hashIndex) put(h uint64, e int32) {
	if 2*(x.n+1) > len(x.slots) {
		x.grow()
	}
	h = fix(h)
	m := x.mask()
	i := h & m
	for x.slots[i] != 0 {
		i = (i + 1) & m
	}
	x.slots[i], x.ents[i] = h, e
	x.n++
}

func (x *hashIndex) grow() {
	old, oldEnts := x.slots, x.ents
	size := max(1024, 2*len(old))
	x.slots, x.ents, x.n = make([]uint64, size), make([]int32, size), 0
	for i, h := range old {
		if h != 0 {
			x.put(h, oldEnts[i])
		}
	}
}

// del removes h, which is in x.
func (x *hashIndex) del(h uint64) {
	h = fix(h)
	m := x.mask()
	i := h & m
	for x.slots[i] != h {
		i = (i + 1) & m
	}
	// Shift back the entries of the run after i that may sit at i.
	for j := i; ; {
		j = (j + 1) & m
		if x.slots[j] == 0 {
			break
		}
		home := x.slots[j] & m
		// The entry at j stays when its home lies cyclically in (i, j].
		if i <= j && i < home && home <= j || i > j && (i < home || home <= j) {
			continue
		}
		x.slots[i], x.ents[i] = x.slots[j], x.ents[j]
		i = j
	}
	x.slots[i], x.ents[i] = 0, 0
	x.n--
}
