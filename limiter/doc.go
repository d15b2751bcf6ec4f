// Package limiter decides whether a request may pass a rate limit.
//
// A Limiter holds the state of one rule: one or more limits ("100 per
// minute", "10,000 per day") enforced together on every key, with one of
// five algorithms:
//
//   - SlidingWindow (the default): two counters per key, the current and the
//     previous window; the count in force is prev×(1−elapsed/W)+curr. O(1)
//     memory, approximate (the error is measured in the tests). Windows are
//     aligned to the Unix epoch, but under Config.Shares, where each key's
//     windows start at its first unit (keyWindow, window.go).
//   - FixedWindow: one counter per window, windows aligned to the Unix epoch
//     so that every node of a cluster agrees on where they start. Exact per
//     window; a client can pass 2N across a window edge. A calendar limit
//     (Config.Periods: day, week, month, year in Config.Location) is a
//     fixed window whose start and length are the period's (calendar.go),
//     and a rule with one takes this algorithm only.
//   - SlidingLog: the timestamps of admitted units, grown on demand up to N.
//     Exact, and the most expensive.
//   - TokenBucket: GCRA, one timestamp per key, kept to a fraction of a
//     nanosecond so that a unit costs exactly W/N; capacity Burst (default
//     N), refilled at N per W. Exact.
//   - LeakyBucket: nginx limit_req; requests above the rate wait in a queue
//     of depth Burst (so Burst+1 pass back to back), for at most MaxDelay,
//     and the Decision says how long.
//
// A Burst on the window algorithms puts a token bucket of capacity Burst,
// refilled at the rate of the shortest-window limit, in front of the window:
// both must pass.
//
// Decisions are all-or-nothing: a request denied by any limit of the rule
// consumes nothing from the others, and Refund gives back what an allowed
// decision took (a Taken), into the window or bucket state it was taken
// from, never a later one (refund.go): for a request that a later rule
// denied, or whose response takes fewer units than it reserved
// (count_status, cost_header). The units a key keeps are then units its
// limits would have admitted alone, so the bounds on any span of one
// window hold for them: N for SlidingLog, 2N for FixedWindow, 2N−1 for
// SlidingWindow, capacity+N−1 for TokenBucket (with a Burst B on a window
// algorithm, B+N−1).
//
// Charge takes units after the fact, past the limits if need be
// (cost_header: the units beyond a reservation, once the response is
// known); charge.go says what "past the limit" means for each algorithm. Blocks holds a rule's blocked keys
// (block_for, block_reset), with escalation, a bound, and a merge for
// blocks learnt from other nodes; MarkSpent pins a blocked key's counters
// against eviction.
//
// Time is always an argument (AllowAt, Refund, Charge, PeekAt); the forms without
// "At" read the wall clock. Time going backwards never gives quota back.
//
// Keys live in a sharded store bounded by Config.MaxKeys: a decision locks
// one shard, never the whole store. A rule of one limit, no burst and no
// shares locks nothing to allow a request on a known key, but one
// compare-and-swap on the one state word the request changes: a bucket's
// TAT (when the unit W/N is a whole number of nanoseconds), a window's
// counts (after the key's first request in the window). A new key, a
// denial, a request that leaves the key spent, a new window and a scaled
// request take the lock, and so does every SlidingLog decision (its state
// is a ring of events, not a word). AllowInto decides into a caller's
// Decision, and a caller that shows no quota (no RateLimit headers) can
// ask it for none: the lock-free path then computes none. Built with the
// tag limiterstats (faststats_on.go; faststats.go is the normal build's
// no-op), the lock-free path counts why it left decisions to the lock
// and how often the lock was waited for: BenchmarkHotKey reports them.
// When a shard is full, an idle key or one not used lately (CLOCK, a
// constant-time approximation of LRU) is evicted. A shard is one open-addressing hash table whose slots are the keys'
// records, hash and state words together, so a decision on a key not in
// cache waits for one cache miss in the store, not two. Keys are stored by
// a 64-bit seeded hash, never as strings, so a key costs the same memory
// however long it is. A decision on a known key allocates nothing.
//
// InFlight (inflight.go) is max_concurrent: the requests of each key in
// flight at once, a Slot per admitted request released when it ends. A
// key has an entry only while it has requests in flight.
package limiter
