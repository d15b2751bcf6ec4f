package limiter

// A shard's index maps a key's hash to its slot: an open-addressing table
// with linear probing, at most 3/4 full, and deletion by backward shift, so
// that no tombstones pile up when keys come and go (a flood of new keys
// evicts one key per request). An entry is the low 32 bits of the hash
// (which give the home position) above the slot plus one; 0 is empty. A
// match of the 32 bits is confirmed against the full hash in the slot's
// word 0, which the decision reads next anyway. At 8 bytes an entry it
// costs 11 to 21 bytes a key, against 17 to 39 for a map[uint64]int32.

// lookup is the slot of the key whose hash is h.
func (s *shard) lookup(h uint64, stride int) (int32, bool) {
	if len(s.table) == 0 {
		return 0, false
	}
	mask := uint32(len(s.table) - 1)
	tag := uint32(h)
	for i := tag & mask; ; i = (i + 1) & mask {
		e := s.table[i]
		if e == 0 {
			return 0, false
		}
		if uint32(e>>32) == tag {
			slot := int32(uint32(e)) - 1
			if s.words(slot, stride)[0]&^refBit == h {
				return slot, true
			}
		}
	}
}

// link enters slot under hash h (not in the table), growing the table if
// it would be more than 3/4 full.
func (s *shard) link(h uint64, slot int32) {
	if 4*(s.live+1) > 3*len(s.table) {
		s.rehash(max(16, 2*len(s.table)))
	}
	s.place(uint64(uint32(h))<<32 | uint64(slot+1))
}

func (s *shard) place(e uint64) {
	mask := uint32(len(s.table) - 1)
	i := uint32(e>>32) & mask
	for s.table[i] != 0 {
		i = (i + 1) & mask
	}
	s.table[i] = e
}

func (s *shard) rehash(size int) {
	old := s.table
	s.table = make([]uint64, size)
	for _, e := range old {
		if e != 0 {
			s.place(e)
		}
	}
}

// unlink removes slot, whose hash is h, from the table, shifting back the
// entries after it that would no longer be found.
func (s *shard) unlink(h uint64, slot int32) {
	mask := uint32(len(s.table) - 1)
	want := uint64(uint32(h))<<32 | uint64(slot+1)
	i := uint32(h) & mask
	for s.table[i] != want {
		i = (i + 1) & mask
	}
	for {
		s.table[i] = 0
		j := i
		for {
			j = (j + 1) & mask
			e := s.table[j]
			if e == 0 {
				return
			}
			// e stays if its home lies cyclically in (i, j]
			home := uint32(e>>32) & mask
			if (j-home)&mask < (j-i)&mask {
				continue
			}
			s.table[i] = e
			i = j
			break
		}
	}
}
