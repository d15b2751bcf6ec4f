// Package topkeys finds the heaviest keys of a stream in bounded memory:
// the busiest or most-denied clients of a rate-limit rule, fed on every
// request, so that they are known without ever scanning the key store.
//
// A Sketch is a Space-Saving summary (Metwally, Agrawal, El Abbadi,
// "Efficient computation of frequent and top-k elements in data streams",
// 2005) split into shards by a seeded hash of the key. Each shard tracks
// a fixed number of keys with their counts; a key that is not tracked
// takes the slot of one of the shard's lightest keys and inherits its
// count, which it reports as Error. A key always lands in the same shard,
// so a shard's counts are the key's counts, and Top merges the shards.
//
// # Guarantees
//
// Let W be the total weight added (Total), S the number of shards and k
// the slots of a shard (Capacity()/S; S = 8 and k = 32 for
// DefaultCapacity). Counting a key's true weight since its last Reset,
// with saturating arithmetic:
//
//   - every tracked key has true ≤ Count ≤ true + Error: Count is an upper
//     bound, Count − Error a lower bound;
//   - an untracked key weighs no more than the count its shard last
//     evicted, which is at most W_s/k, W_s being the weight that went to
//     that shard; so Error ≤ W_s/k ≤ W/k, and every key heavier than W/k
//     (more than 1/32 of the traffic for DefaultCapacity) is tracked —
//     both until W saturates at 2⁶⁴−1;
//   - while no shard has had to evict, counts are exact and Error is 0.
//     Below a capacity of 64 there is one shard, exact for up to
//     Capacity() distinct keys; with several shards, one may fill before
//     the sketch does.
//
// Keys longer than MaxKeyLen bytes are counted by their first MaxKeyLen
// bytes: keys sharing that prefix share one entry, marked Truncated.
//
// # Costs
//
// Add locks one shard (never more: Adds of keys in different shards do
// not contend), finds the key in an open-addressing index, and moves it
// in the shard's Stream-Summary: buckets of equal count in a list by
// ascending count. With weight 1 every step is O(1): a key moves to the
// next bucket, or its bucket goes up in place if the key is alone in it,
// as the heaviest keys are; a new key takes a slot of the first bucket. A
// weight that jumps over b buckets costs O(b) ≤ O(k). Keys of up to 16
// bytes (an IPv4 address, most ids) are hashed inline and stored and
// compared as two words; longer ones are hashed with hash/maphash, copied
// to their slot's MaxKeyLen-byte buffer and compared with it. Add never
// allocates.
//
// Top copies each shard under its lock (under a microsecond for 64
// keys), then selects and sorts outside the locks; it allocates the
// result.
//
// Memory is allocated by New and never grows: 216 bytes a slot (MaxKeyLen
// for the key, 48 for the slot, 24 for its bucket, 16 of index) and 256
// a shard: 57,416 bytes (56 KiB) for DefaultCapacity. Bytes reports it.
package topkeys
