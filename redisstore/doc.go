// Package redisstore keeps rate-limit state in Redis, so that every node of
// a fleet enforces one exact, global limit. It does not import Caddy: the
// handler wires it in, and falls back to the in-process limiter when Redis
// is unavailable.
//
// # Atomicity
//
// A decision is one Lua script, run with EVALSHA (EVAL with the source
// when Redis answers NOSCRIPT, after a restart or SCRIPT FLUSH: the
// Batcher sends the command as a plain redis.Cmd, built in one slice).
// Redis runs a script alone, so reading the state, checking every
// limit of the rule and taking the units from all of them or none is one
// atomic step: no interleaving of callers can admit more than the limit
// (peers that read, decide in the client and write back over-admit under
// concurrency). There is one script per algorithm, made of a shared
// prelude and driver around the algorithm's step (script_*.go).
//
// # Time
//
// Scripts read the clock with redis.call('TIME'), in microseconds: every
// node decides on the same clock, whatever its own skew. Since TIME is
// non-deterministic, the script's effects (its writes), not the script,
// must be what replicas and the AOF get: the default since Redis 5 and
// the only mode since 7; on 3.2–4 the script asks for it with
// redis.replicate_commands(). A calendar limit's periods, which Lua
// cannot compute, come from the Store with each call: the ones around its
// clock, of which the script takes the one holding TIME (calendar.go).
// Windows must be whole microseconds. Lua
// numbers are doubles: products such as count × window (µs) are exact up
// to 2^53 (2.5 million per hour, 100,000 per day), and compared to within a
// relative 1e-16 beyond.
//
// # Keys and state
//
// A user key k of a rule with prefix P lives in the hash P{tag}, where tag
// is k with '%', '{' and '}' escaped (a long key is replaced by its
// SHA-256): the braces are a Redis Cluster hash tag, so all of one key's
// Redis keys share a slot, and nothing in k can move the tag (see
// Escape). Per limit i the hash holds:
//
//   - fixed_window: a<i> window start, b<i> units taken in it.
//   - sliding_window: a<i> current window start, b<i> previous count,
//     c<i> current count; the estimate is prev×(1−elapsed/W)+curr.
//   - token_bucket, leaky_bucket (GCRA): a<i> the theoretical arrival time
//     in µs, b<i> its fraction in count-ths of a µs, so a unit costs
//     exactly W/count.
//   - sliding_log: b<i> units held, s a sequence; the events are in the
//     ZSET P{tag}:log:<i> (score: time; member: "seq:units"), at most count
//     members.
//
// Window algorithms with a Burst also keep ba, bb: the token bucket in
// front of the shortest window. Decisions match limiter's for the same
// limits and times (the tests compare them): same Remaining, Reset and
// RetryAfter formulas, all-or-nothing across limits, cost, Refund.
//
// # Blocks, charges, leases
//
// With Config.BlockFor, a key's block lives in a hash of its own beside
// its counters ("<prefix>{<tag>}:block": until, offences, when they are
// forgotten; TTL the block plus BlockReset), read and started by the
// decision's script itself: a blocked key is denied without taking
// units, and a denial starts the next block of the escalation, in the
// same round trip (Decide, Check; see block.go). Reset lifts it.
//
// Units taken after the response (count_status, cost_header) are a Check
// before the request (one unit left, nothing taken) and a ChargeScaled
// after it, which takes the units past the limits if need be; charge.go
// gives the semantics per algorithm.
//
// Leases (max_concurrent) are a separate type, Leases: per key a sorted
// set of lease ids scored by expiry on Redis's clock, acquired by one
// script, renewed by one goroutine per Leases in one pipelined call, and
// released with ZREM (lease.go).
//
// # Memory
//
// Every admission sets a PEXPIRE on the key's Redis keys: until the
// longest window ends (fixed_window, sliding_log), two windows (the
// previous count of sliding_window), or the furthest TAT (the buckets),
// and at least a second: a state past its window is ignored when read, and
// a key whose window ends a few µs after its decision (on the caller's
// clock, which tests give the scripts) is not gone, in Redis's own time,
// before a give-back of that decision lands.
// An idle key disappears from Redis on its own; a denial or a refund never
// creates one.
//
// # The wire
//
// A Store sends its scripts through a Batcher (Config.Batcher; without
// one, each call is a round trip of its own): a call that finds its
// client idle yields once and goes at once, with the calls already
// runnable or alone, and the calls that arrive meanwhile,
// of every Store sharing the Batcher, go together in one pipeline when it
// lands. A pipeline changes no decision, since each script still runs
// alone in Redis; it saves a write and a read per call (batch.go).
//
// # Failure
//
// Every call takes its deadline from its context (the Caddy wiring will
// give 50 ms by default). Use a client with ContextTimeoutEnabled, so the
// deadline reaches the socket, and MaxRetries -1: a script retried after a
// lost reply may have run already and would take its units twice. Errors
// that mean Redis could not decide wrap ErrUnavailable; the caller's
// on_store_error policy (fail open, fail closed, or decide locally) applies
// to them. A Store's Breaker stops a dead Redis from costing a timeout per
// request: after a failure, calls fail fast without touching Redis for
// Config.ProbeInterval, then one call probes; Breaker.Stats counts
// failures, fast failures, probes and state changes for metrics.
package redisstore
