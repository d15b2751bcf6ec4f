// Package gossip lets a fleet of Caddy nodes share one global rate limit.
// Every sync interval (100 ms by default) each node sends the others a
// compact Report of its demand for the keys that are hot on it, and every
// node computes from the reports it has the same share of each limit.
// Requests are always decided locally: nothing in this package runs on
// the request path.
//
// # Membership
//
// Cluster wraps github.com/hashicorp/memberlist (SWIM failure detection
// over UDP, state exchange over TCP). New joins the configured seeds in
// the background, retrying with backoff, and never blocks on them; once
// joined it keeps trying to reconnect to members declared dead, so that
// the two sides of a healed partition merge again (memberlist alone gives
// up on dead members after GossipToTheDeadTime). Members lists members as
// alive, left (Close sends a leave message, then memberlist's leave) or
// dead (failure detection); memberlist does not expose suspicion, so a
// suspect member is listed alive.
//
// # Messages
//
// Messages are binary and versioned, with fixed-width integers and
// length-prefixed strings (see codec.go): a version byte, a type byte
// (report, reset, leave), then the body. In reports, keys and rules
// travel as KeyHash values (XXH64, seed 0), the same on every node; a
// report entry takes 28 bytes.
//
// Reports go to every other live member as single UDP packets
// (memberlist SendBestEffort), unacknowledged: each report supersedes the
// last, so a lost one costs one interval. A report is split (SplitReport)
// so that each part fits one packet of memberlist's UDPBufferSize (1400
// bytes) after memberlist's framing: 1 byte of message type, 5 of CRC, up
// to 45 of AES-GCM, 2+len(label) of label; that leaves 1338 bytes with
// the default label, about 45 entries per packet. Parts of one report
// share its Node and Seq. Compression is off: hashes do not compress.
//
// Blocks (block_for) travel with the reports, carrying the key itself (at
// most MaxBlockKeyBytes, 1024): a report part that has blocks is a
// MsgReportBlocks, a report's layout followed by its blocks, and
// SplitReport puts blocks in parts of their own, so that a node that
// knows no blocks still reads every entry. The node that made a block
// repeats it in its reports while it runs, new blocks first and the
// others round robin within a byte budget (blocks.go), so that a node
// that joins or comes back learns the blocks in force; the receiver hands
// them to SharingConfig.OnBlock, which merges them (limiter.Blocks).
//
// Resets (the admin API forgetting a key) carry the rule's name and the
// key themselves, at most MaxRuleBytes (255) and MaxKeyBytes (4096)
// bytes, since each node's limiter hashes keys with its own private seed.
// They are rare and must arrive: they are sent over TCP (memberlist
// SendReliable) to every live member at once, and BroadcastReset reports
// who could not be reached. Overrides (an operator's factor on one key's
// limits) travel the same way, one change a message, opaque here
// (BroadcastOverride, Config.OnOverride); a node that sees another join
// or come back asks it for its overrides (Config.OnJoin, AskOverrides)
// and is sent them, one message after another (SendOverrides), so a node
// that was away learns those set meanwhile (override.go).
//
// Decoding never panics, allocates no more than the input's length
// allows, and rejects unknown versions and types, truncated messages,
// trailing bytes, reports of more than MaxEntries entries and resets
// whose rule or key is over its bound. Received messages are decoded on
// memberlist's goroutine and handed to the callbacks on another, through
// a bounded queue, so that a slow callback cannot delay memberlist's
// failure detection; Stats counts what was dropped, by reason.
//
// # Shares
//
// Allocate splits one key's limit among the nodes by their reported
// demand, the same way on every node: each live node keeps a floor (2% of
// the limit, split among the nodes); when the cluster asks for less than
// the rest, every node gets its demand plus 10% and the remainder is split
// evenly; otherwise the rest is split in proportion to demand. ShareTable
// is a node's view: the latest report of each node, expiring after a TTL
// (3 intervals + 500 ms), bounded in keys (LRU), and the on_partition
// policy when a node sees no more than half the cluster. A node counts
// its own demand as the others know it (for RaiseDelay after its report,
// the lower of its last two), so a raise its own demand makes waits for
// the others to hear it and cut; cuts apply at once, and so do raises the
// others' reports make (they cut first, in their own). While a node is
// silent raises wait RaiseDelay and take the lowest target seen; under
// fail_closed no raise comes for two raise delays after a node comes back
// (a heal: the side that hears the other first would raise before the
// other cut). A node's demand is smoothed (10% weight an interval, a
// key's first interval taken as it is, zeroed only when idle and below
// 0.5); a single interval moves it at once only if a Poisson count of the
// smoothed mean would be that far with probability < 1e-3. Cold keys get
// (1+10%)/N of the limit, the seed's rule. A window algorithm's key is
// reported also when its use of the window in force (Rule.Used) reaches
// half its share, and a hot key whose demand is idle as the others know
// it is divided in proportion to the nodes' use (Entry.Admitted), floors
// kept, until no node reports a use: a long window's key asked a few
// times a minute keeps its share where it is used (limit 30 a day, one
// node of three: 29 admitted, where it went back to the cold share, 11,
// between two requests; gossip/sim TestLongWindowOneNode). Under a share the limiter
// holds a token bucket at min(burst, 3) units at least, refilled at the
// share's rate unrounded (to 1/1024 of a unit a window), and starts a
// sliding window's windows at the key's first request, weighing the
// previous window's part rounded down (limiter.Config.Shares). A bucket
// (token or leaky) of a window of RescaleMinWindow (2 s) or more reports
// its units in use too (Rule.Used), and its state moves with its share
// (Rule.Rescale, limiter.Limiter.RescaleAt): a bucket's state is the time
// until it is full again, which a unit of a larger share makes shorter,
// so that its units in use, not the part of its capacity, stay when the
// share moves (a cut leaves a debt). Left as a time, a bucket emptied at
// the cold share stayed empty at a larger one: token_bucket, limit 30 a
// day on one node of three, 11 admitted there, now 29 (TestLongWindowOneNode);
// at 1 s the shares that follow the rate do as well without it. Issue 23
// traced the fleet's lost units to these: at three nodes sharing 2×L of
// L = 100 (7 requests a node an interval) the fleet admitted 0.87–0.94×L
// a second, and a new key's first second with sliding_window 1.22–1.26×L;
// at five nodes token_bucket's even split 0.65–0.88×L. Simulated now
// (gossip/sim TestFleet, seeds 1–5), 3 and 5 nodes, 2×L and 5×L, even,
// 70/20/10, one node and a shift: every second from a key's third within
// 0.90–1.10×L, medians 0.96–1.00, first seconds at most 1.08×L. A window algorithm's count stays with the node
// that made it when a share moves (a token bucket's state is a rate and
// needs nothing): its reports carry its use of the window in force
// (Entry.Admitted, Rule.Used), and every node caps its share at what the
// others' use leaves of the limit, plus 5%, a cap that lifts as soon as
// their windows slide (no raise delay); without it, a move of all traffic
// admitted 1.31×L in a 1 s window with sliding_window, with it 1.09×L.
// The deterministic simulator in gossip/sim runs real limiters with
// these shares over a simulated network; its figures for 10 and 100 nodes
// are in BENCHMARKS.md. Under local_share, a node in
// a strict minority whose known peers went silent keeps seen/N of its
// share, and its side at most 10% of the limit, since the majority will
// reclaim the silent nodes' shares: a 4|6 partition admits 1.03–1.05×L.
// Under fail_closed the minority denies (at most 0.99×L in all); under
// fail_open it lifts the limit.
//
// Concurrency rules (max_concurrent N, Rule.Concurrent) share N the same
// way in requests in flight (slots.go): demand is the peak in flight plus
// the refusals of an interval, caps are whole requests that sum to N, and
// each node's cap leaves room for what the others hold above their caps
// (a cut ends no request in flight). Simulated (gossip/sim RunSlots), 3
// nodes, N=30, 80% of arrivals on one node: never more than N in flight.
//
// # Security
//
// All cluster traffic, UDP and TCP, is encrypted and authenticated with
// AES-GCM under the first of Config.SecretKeys; every key listed is
// accepted on receipt, for rotation. A node with another key cannot join
// and its packets are dropped. The memberlist label ("edgelimit" by
// default) is authenticated with the key and keeps separate clusters on
// one network apart. New refuses to start without a key unless it binds
// a loopback address.
//
// memberlist drops what fails its checks (no label or another one, failed
// decryption, a message it cannot decode) with nothing but a log line.
// The logger New gives it classifies those lines (droplog.go, after
// memberlist v0.7.0's messages) and counts each drop once in
// Stats.Dropped by reason, and samples them with this package's own
// drops: the first line of a reason, then at most one a second, which
// says how many were not logged. Junk on the gossip port costs a few log
// lines a second, not one a packet. A stream that ends before its first
// byte is counted "empty" (streamwatch.go): port scans make them, and so
// does a member under load whose TCP ping gives up. A stream that
// carries the label and ends before its first message is dropped by
// memberlist without a line, and is not counted; a memberlist that words
// its lines otherwise would pass them as they are, uncounted
// (TestJunkOnGossipPort would fail).
//
// memberlist reads what a stream claims (an encrypted message's length,
// up to 20 MiB) before it can tell whether the sender holds the key, and
// serves every stream at once: 30 connections that claimed 20 MiB took a
// node from 58 MiB to 931 MiB. So each stream received is bounded
// (streamcap.go): one that claims or sends more than MaxStreamBytes (256
// KiB, twice a push/pull of 256 members) is closed ("stream_oversized"),
// one that arrives while MaxInboundStreams (32) are open is closed at
// once ("stream_excess"), and one that has not sent its message within
// StreamReadTimeout (5 s) is closed ("stream_timeout"). 1,000 such
// connections at once add 2 MiB to a node; 1,000 that send what the
// bound lets through, 14 MiB (TestGossipHostileStreams). A neighbour that
// keeps 32 streams open delays members' push/pulls and resets, not
// failure detection, which is UDP.
//
// # Not guaranteed
//
// Delivery of reports (UDP, no retry), their order, or that every node
// has the same reports at the same time: shares converge within a few
// intervals, not at once. A reset reaches only the members alive and
// reachable when it is sent. Members' views of the cluster may differ
// for a while after a change (SWIM is eventually consistent). Nodes are
// trusted once they hold the key: a member can send any report.
package gossip
