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
}

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
