package topkeys

// ientry is a cell of a shard's open-addressing index: the low 32 bits of
// the key's hash, and the key's slot + 1 (0 marks an empty cell).
type ientry struct {
	hash uint32
	slot uint32
}

// index maps a key hash to its slot by linear probing. Its size is a power
// of two at least twice the number of slots, so a probe always ends at an
// empty cell; deletion shifts entries back instead of leaving tombstones.
type index []ientry

// newIndex returns an index for k slots.
func newIndex(k int) index {
	n := 2
	for n < 2*k {
		n <<= 1
	}
	return make(index, n)
}

// insert records slot under hash. The key must not be present.
func (ix index) insert(hash uint32, slot int) {
	mask := uint32(len(ix) - 1)
	p := hash & mask
	for ix[p].slot != 0 {
		p = (p + 1) & mask
	}
	ix[p] = ientry{hash: hash, slot: uint32(slot) + 1}
}

// remove deletes slot, recorded under hash, and shifts back the entries
// that probed past it.
func (ix index) remove(hash uint32, slot int) {
	mask := uint32(len(ix) - 1)
	want := uint32(slot) + 1
	i := hash & mask
	for ix[i].slot != want {
		i = (i + 1) & mask
	}
	for j := i; ; {
		j = (j + 1) & mask
		e := ix[j]
		if e.slot == 0 {
			break
		}
		// e may fill the hole at i unless its home lies in (i, j].
		if home := e.hash & mask; (j-home)&mask >= (j-i)&mask {
			ix[i] = e
			i = j
		}
	}
	ix[i] = ientry{}
}
