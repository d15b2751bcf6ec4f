package geo

import "sync/atomic"

// cacheBits sets the size of a codeCache: 1<<cacheBits entries of 8 bytes.
const cacheBits = 12

// codeCache remembers which country code (or none) recently read records
// hold, by the record's offset in the database, so that a lookup of a
// network seen before decodes nothing. Many networks share one record: a
// Country database has a few hundred records in all.
//
// It is direct-mapped and lock-free: an entry is one atomic word, the
// offset plus one above the code's index plus one (0 for no code), so a
// torn read cannot happen and a zero entry matches no offset. A newer
// record evicts the older one of its slot.
type codeCache [1 << cacheBits]atomic.Uint64

// codeBits holds a code's index plus one: numCodes+1 values.
const codeBits = 10

// slot returns the entry for a record offset.
func (c *codeCache) slot(offset uintptr) *atomic.Uint64 {
	return &c[(uint64(offset)*0x9e3779b97f4a7c15)>>(64-cacheBits)]
}

// get returns the code index stored for the record at offset (-1 for a
// record without a code), and whether it was there.
func (c *codeCache) get(offset uintptr) (index int, hit bool) {
	e := c.slot(offset).Load()
	if e>>codeBits != uint64(offset)+1 {
		return 0, false
	}
	return int(e&(1<<codeBits-1)) - 1, true
}

// put stores the code index (-1 for none) of the record at offset.
func (c *codeCache) put(offset uintptr, index int) {
	c.slot(offset).Store((uint64(offset)+1)<<codeBits | uint64(index+1))
}
