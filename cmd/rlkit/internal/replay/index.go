package replay

// The index of a keyTable: open addressing with linear probing, at most
// half full, over 64-bit slots, each the upper 32 bits of a key's hash
// (its tag) and its entry plus one (0: an empty slot). A hash's home slot
// is its low bits. A slot whose tag matches is checked against the hash in
// its entry, so a lookup reads the index and the entry it finds, nothing
// else. Deletion shifts back the slots after the freed one, so that no
// tombstone is left behind and lookups stay short however many keys come
// and go. A hash is never 0 (fix).

func fix(h uint64) uint64 {
	if h == 0 {
		return 1
	}
	return h
}

// slotOf is the slot of entry e, of hash h.
func slotOf(h uint64, e int32) uint64 { return h>>32<<32 | uint64(uint32(e)+1) }

// find returns the entry of hash h, or -1 and the empty slot where the
// probe for h ended (-1 when the index is empty).
func (t *keyTable) find(h uint64) (e int32, slot int) {
	if len(t.idx) == 0 {
		return -1, -1
	}
	mask := len(t.idx) - 1
	tag := h >> 32
	for i := int(h) & mask; ; i = (i + 1) & mask {
		s := t.idx[i]
		if s == 0 {
			return -1, i
		}
		if s>>32 == tag {
			if e := int32(uint32(s) - 1); uint64(t.ent(e)[entHash]) == h {
				return e, i
			}
		}
	}
}

// grow doubles the index (to 1,024 slots at first) and places every
// held entry in it again.
func (t *keyTable) grow() {
	t.idx = make([]uint64, max(1024, 2*len(t.idx)))
	mask := len(t.idx) - 1
	for e := range t.made {
		h := uint64(t.ent(e)[entHash])
		if h == 0 {
			continue
		}
		i := int(h) & mask
		for t.idx[i] != 0 {
			i = (i + 1) & mask
		}
		t.idx[i] = slotOf(h, e)
	}
}

// del removes entry e, of hash h, from the index.
func (t *keyTable) del(h uint64, e int32) {
	mask := len(t.idx) - 1
	i := int(h) & mask
	for uint32(t.idx[i]) != uint32(e)+1 {
		i = (i + 1) & mask
	}
	// Shift back the slots of the run after i that may sit at i.
	for j := i; ; {
		j = (j + 1) & mask
		s := t.idx[j]
		if s == 0 {
			break
		}
		home := int(uint64(t.ent(int32(uint32(s) - 1))[entHash])) & mask
		// The slot at j stays when its home lies cyclically in (i, j].
		if i <= j && i < home && home <= j || i > j && (i < home || home <= j) {
			continue
		}
		t.idx[i] = s
		i = j
	}
	t.idx[i] = 0
	t.n--
}
