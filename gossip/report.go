package gossip

// Report is what one node tells the others every sync interval: its
// demand for the keys that are hot on it (near their local share). Keys
// and rules travel as 64-bit hashes (KeyHash), the same on every node.
type Report struct {
	// Node is the sender's memberlist node name.
	Node string
	// Seq increases by one with each report a node sends, so that a
	// receiver can drop old or repeated reports.
	Seq uint64
	// IntervalMillis is the length of the interval the demand was
	// measured over, in milliseconds.
	IntervalMillis uint32
	// Entries are the hot keys, at most MaxEntries.
	Entries []Entry
	// Blocks are keys the sender blocked (block_for), at most MaxBlocks,
	// each key at most MaxBlockKeyBytes. A sender repeats a block in its
	// reports while it runs (see Sharing.PublishBlock).
	Blocks []Block
}

// Block is a block one node made on one key: every node refuses the key's
// requests until the block ends. Unlike an Entry, it carries the key
// itself, since each node's Blocks (limiter) are keyed by the string.
type Block struct {
	Rule        uint64 // KeyHash of the rule's name
	Key         string // the key, at most MaxBlockKeyBytes bytes
	UntilMillis int64  // the block's end, Unix milliseconds (rounded up)
	Offences    uint32 // the key's blocks remembered, this one included
}

// MaxBlocks bounds the blocks of one report (or part of one).
const MaxBlocks = 1024

// MaxBlockKeyBytes is the longest key a Block can carry (the longest key
// a shared rule keeps, caddymodule's maxSharedKeyBytes).
const MaxBlockKeyBytes = 1024

// Entry is one hot key's demand on the sending node over the interval.
type Entry struct {
	Rule   uint64 // KeyHash of the rule's name
	Key    uint64 // KeyHash of the key
	Limit  uint32 // the rule's global limit in force on the sender, in units per window (first limit)
	Demand uint32 // units the key asked for on the sender (allowed or not), saturating
	// Admitted is the units the key has used of its limit on the sender in
	// the window in force (a window algorithm's count; 0 for buckets),
	// saturating: the others cap their shares so that their use and this
	// stay within the limit while a share moves.
	Admitted uint32
}

// MaxEntries bounds the entries of one report.
const MaxEntries = 4096
