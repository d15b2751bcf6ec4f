// Package sim is a deterministic simulator of a cluster of rate-limiting
// nodes that divide one global limit per key by gossiping demand
// (gossip.ShareTable, gossip.Allocate). Time is virtual and advances in
// steps of one millisecond; the network, the traffic and the node deaths
// are driven by one seeded random source, so a Scenario always gives the
// same Result.
//
// Each node has a real limiter.Limiter with Config.Shares and the
// TokenBucket algorithm (L per second, burst L/10, both multiplied by the
// share). A token bucket is chosen over sliding_window because it turns
// "the shares in force sum to at most 1 at every instant" into "the
// cluster admits at most L per second plus the bursts over any window":
// its state is a rate, so share moved from node A to node B stops A at
// once and lets B admit only at the new rate from then on. A sliding
// window keeps, per node, the count of the last window: a node whose share
// rises gets the whole of its new share at once although the node that
// lost it already spent it in the same window, and a move of traffic can
// then admit up to 2L in one window.
package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/edgebyte/edgelimit/gossip"
	"github.com/edgebyte/edgelimit/limiter"
)

// Dist is how the traffic is spread over the nodes.
type Dist int

// The distributions.
const (
	Even Dist = iota // the same rate on every node
	Zipf             // node i gets a weight of 1/(i+1)
	One              // everything on node 0
)

func (d Dist) String() string { return [...]string{"even", "zipf", "one"}[d] }

// Scenario is one run.
type Scenario struct {
	Name    string
	Nodes   int     // default 10
	Seconds int     // default 10
	Limit   int64   // L, units per Window; default 1000
	Offered float64 // offered load, × L a second (summed over the keys); default 1.5
	// Window is the limit's window. Default 1s.
	Window time.Duration
	// Rate, if set, is the offered load in requests a second, instead of
	// Offered (a long window's key is asked a few times a minute).
	Rate float64
	Dist Dist
	Keys int // default 1; more: Zipf(1.1) over the keys, each with its own L
	// Algorithm is the nodes' limiter algorithm. Default: token bucket
	// (burst L/10); a window has no burst.
	Algorithm limiter.Algorithm
	// Burst is a token bucket's capacity, units. Default: L/10 (at least
	// 1); a rule's own default, L, is Burst = Limit.
	Burst int64
	Seed  uint64  // default 1
	Loss  float64 // probability that a message is lost

	// Latency is the one-way delay of a message, plus up to Jitter more.
	// Defaults: 5ms and 5ms.
	Latency, Jitter time.Duration
	// Interval is the sync interval. Default 100ms.
	Interval time.Duration

	// Weights, if set, is each node's part of the traffic (any scale; the
	// nodes past its end get none), instead of Dist.
	Weights []float64
	// ShiftAt: if set, the traffic is split by ShiftTo from then on.
	ShiftAt time.Duration
	ShiftTo []float64

	// Paced: the traffic is one client's, as the integration tests send
	// it: requests evenly spaced at the offered rate, each to a node drawn
	// at random by weight. Default: each node gets a Poisson stream of its
	// part of the rate.
	Paced bool
	// RandomTicks: each node ticks at a random phase of the interval, as
	// real nodes' timers do. Default: the nodes' ticks are evenly
	// staggered over the interval.
	RandomTicks bool
	// Start is where in the limiters' epoch-aligned windows (1 s) the run
	// starts, as a real key's first request falls anywhere in a window.
	// Default 0: on a window's start.
	Start time.Duration

	// MoveAt: if set, all the traffic moves to node 1 at that time (from
	// wherever Dist put it).
	MoveAt time.Duration
	// KillAt: if set, node 0 dies then; its traffic is spread over the others.
	KillAt time.Duration
	// PartitionAt: if set, the first PartitionSize nodes stop hearing from
	// the others (and the others from them) from then on.
	PartitionAt   time.Duration
	PartitionSize int
	// HealAt: if set, the partition ends then.
	HealAt      time.Duration
	OnPartition gossip.PartitionPolicy
}

// Result is what a Scenario gave.
type Result struct {
	Scenario Scenario
	// PerSecond is, per second of the run, the units admitted over L
	// (summed over all the keys).
	PerSecond []float64
	// OfferedPerSecond is the units asked over L, likewise.
	OfferedPerSecond []float64
	// MaxWindow is the most admitted over L in any 1s window starting on a
	// 10ms boundary, from the second second on (the first one includes the
	// cold start).
	MaxWindow float64
	// BytesPerNodeSecond is the gossip sent per node per second, reports
	// estimated at 32 bytes plus 28 per entry.
	BytesPerNodeSecond float64
	// EntriesPerReport is the mean number of keys per report.
	EntriesPerReport float64
	// TopKeyPerSecond is, with several keys, the most asked key's
	// admitted/L per second.
	TopKeyPerSecond []float64
	// Admitted is the units admitted over the run, on each node.
	Admitted []int64
}

// message is a report on its way to node to.
type message struct {
	to int
	r  gossip.Report
}

type node struct {
	name  string
	lim   *limiter.Limiter
	share *gossip.Sharing
	dead  bool
}

// rule is the one rule of the simulation, by hash.
var rule = gossip.KeyHash("sim")

type sim struct {
	s       Scenario
	rng     *rand.Rand
	zipf    *rand.Zipf
	nodes   []*node
	net     network
	names   []string // key index → limiter key
	bytes   int64
	reports int64
	entries int64
}

func keyName(i uint64) string { return fmt.Sprintf("k%d", i) }

func (s *Scenario) defaults() {
	orDefault(&s.Nodes, 10)
	orDefault(&s.Seconds, 10)
	orDefault(&s.Limit, 1000)
	orDefault(&s.Offered, 1.5)
	orDefault(&s.Keys, 1)
	orDefault(&s.Seed, 1)
	orDefault(&s.Latency, 5*time.Millisecond)
	orDefault(&s.Jitter, 5*time.Millisecond)
	orDefault(&s.Interval, gossip.DefaultSyncInterval)
	orDefault(&s.PartitionSize, 4)
	orDefault(&s.Algorithm, limiter.TokenBucket)
	orDefault(&s.Window, time.Second)
	orDefault(&s.Burst, max(s.Limit/10, 1))
	orDefault(&s.Rate, s.Offered*float64(s.Limit)/s.Window.Seconds())
}

var epoch = time.Unix(1_700_000_000, 0)

func at(ns int64) time.Time { return epoch.Add(time.Duration(ns)) }

// at is the time ns into the run, which starts Scenario.Start into a window.
func (sm *sim) at(ns int64) time.Time { return at(int64(sm.s.Start) + ns) }

// Run runs s.
func Run(s Scenario) Result {
	s.defaults()
	sm := &sim{s: s, rng: rand.New(rand.NewPCG(s.Seed, 0x5eed))}
	sm.net = network{rng: sm.rng, latency: s.Latency, jitter: s.Jitter}
	if s.Keys > 1 {
		sm.zipf = rand.NewZipf(sm.rng, 1.1, 1, uint64(s.Keys-1))
	}
	for i := range s.Keys {
		sm.names = append(sm.names, keyName(uint64(i)))
	}
	burst := int64(0)
	if s.Algorithm == limiter.TokenBucket {
		burst = s.Burst
	}
	for i := range s.Nodes {
		lim, err := limiter.New(limiter.Config{
			Algorithm: s.Algorithm,
			Limits:    []limiter.Limit{{Count: s.Limit, Window: s.Window}},
			Burst:     burst,
			Shares:    true,
		})
		if err != nil {
			panic(err)
		}
		name := fmt.Sprintf("node-%03d", i)
		sh := gossip.NewSharing(gossip.SharingConfig{Self: name, Interval: s.Interval, OnPartition: s.OnPartition})
		sh.SetClusterSize(s.Nodes)
		rule := gossip.Rule{Name: "sim", Window: s.Window, Demand: func(key string) uint64 {
			d, _ := lim.TakeDemand(key)
			return d
		}}
		rule.Used = func(key string, now time.Time, share float64) uint64 {
			return uint64(lim.UsedScaledAt(key, now, share))
		}
		if s.Algorithm == limiter.TokenBucket || s.Algorithm == limiter.LeakyBucket {
			rule.Rescale = lim.RescaleAt
		}
		sh.SetRules([]gossip.Rule{rule})
		sm.nodes = append(sm.nodes, &node{name: name, lim: lim, share: sh})
	}
	return sm.run()
}

// weights is each node's part of the traffic at t.
func (sm *sim) weights(t time.Duration) []float64 {
	s := sm.s
	w := make([]float64, s.Nodes)
	switch split := s.Weights; {
	case s.ShiftAt > 0 && t >= s.ShiftAt:
		copy(w, s.ShiftTo)
	case split != nil:
		copy(w, split)
	case s.Dist == Even:
		for i := range w {
			w[i] = 1
		}
	case s.Dist == Zipf:
		for i := range w {
			w[i] = 1 / float64(i+1)
		}
	case s.Dist == One:
		w[0] = 1
	}
	if s.MoveAt > 0 && t >= s.MoveAt {
		clear(w)
		w[1] = 1
	}
	if s.KillAt > 0 && t >= s.KillAt {
		if moved := w[0]; moved > 0 {
			w[0] = 0
			if rest := sumOf(w); rest > 0 {
				for i := range w {
					w[i] += moved * w[i] / rest
				}
			} else {
				w[1] = moved
			}
		}
	}
	total := sumOf(w)
	for i := range w {
		w[i] /= total
	}
	return w
}

func sumOf(w []float64) float64 {
	t := 0.0
	for _, x := range w {
		t += x
	}
	return t
}

// poisson draws a Poisson variate of small mean (Knuth), or a normal
// approximation above 30.
func (sm *sim) poisson(mean float64) int {
	if mean <= 0 {
		return 0
	}
	if mean > 30 {
		return max(0, int(math.Round(mean+math.Sqrt(mean)*sm.rng.NormFloat64())))
	}
	l, k, p := math.Exp(-mean), 0, 1.0
	for {
		p *= sm.rng.Float64()
		if p <= l {
			return k
		}
		k++
	}
}

// pick draws a node by weight (w sums to 1).
func (sm *sim) pick(w []float64) int {
	x := sm.rng.Float64()
	for i, p := range w {
		if x -= p; x < 0 {
			return i
		}
	}
	return len(w) - 1
}

func (sm *sim) partitioned(a, b int, t time.Duration) bool {
	s := sm.s
	if s.PartitionAt == 0 || t < s.PartitionAt || s.HealAt > 0 && t >= s.HealAt {
		return false
	}
	return (a < s.PartitionSize) != (b < s.PartitionSize)
}

func (sm *sim) tick(i int, now int64) {
	n := sm.nodes[i]
	r := n.share.Tick(sm.at(now))
	sm.reports++
	sm.entries += int64(len(r.Entries))
	for j, m := range sm.nodes {
		if j == i || m.dead {
			continue
		}
		sm.bytes += 32 + 28*int64(len(r.Entries))
		if sm.partitioned(i, j, time.Duration(now)) || sm.rng.Float64() < sm.s.Loss {
			continue
		}
		sm.net.send(now, j, r)
	}
}

func (sm *sim) run() Result {
	s := sm.s
	ms := int64(time.Millisecond)
	steps := int64(s.Seconds) * 1000
	interval := s.Interval.Milliseconds()
	admitted := make([]int64, steps)
	asked := make([]int64, steps)
	topKey := make([]int64, s.Seconds)
	rate := s.Rate                  // units per second over the cluster
	phase := make([]int64, s.Nodes) // each node ticks when step%interval is its phase
	for i := range phase {
		phase[i] = int64(i) * interval / int64(s.Nodes)
		if s.RandomTicks {
			phase[i] = sm.rng.Int64N(interval)
		}
	}
	arrivals := make([][]int64, s.Nodes) // this step's requests on each node (ns)
	perNode := make([]int64, s.Nodes)
	sent := 0.0 // Paced: requests sent so far
	var w []float64
	for step := range steps {
		now := step * ms
		t := time.Duration(now)
		if s.KillAt > 0 && t >= s.KillAt && !sm.nodes[0].dead {
			sm.nodes[0].dead = true
		}
		if step%100 == 0 || w == nil {
			w = sm.weights(t)
		}
		sm.net.deliver(now+ms, func(to int, r gossip.Report, at int64) {
			if n := sm.nodes[to]; !n.dead {
				n.share.Observe(r, sm.at(at))
			}
		})
		for i := range arrivals {
			arrivals[i] = arrivals[i][:0]
		}
		if s.Paced {
			for due := rate * float64(step+1) / 1000; sent+1 <= due; sent++ {
				when := int64(sent / rate * 1e9)
				i := sm.pick(w)
				arrivals[i] = append(arrivals[i], when)
			}
		}
		for i, n := range sm.nodes {
			if n.dead {
				continue
			}
			if (step-phase[i])%interval == 0 {
				sm.tick(i, now)
			}
			if !s.Paced { // drawn here, after the tick: the random sequence of the tables in BENCHMARKS.md
				k := sm.poisson(rate * w[i] / 1000)
				for j := range k {
					arrivals[i] = append(arrivals[i], now+int64(j)*ms/int64(k))
				}
			}
			for _, when := range arrivals[i] {
				key := uint64(0)
				if sm.zipf != nil {
					key = sm.zipf.Uint64()
				}
				name := sm.names[key]
				share, tracked := n.share.ShareAt(rule, name, uint32(s.Limit), sm.at(when))
				asked[step]++
				d := n.lim.AllowScaledAt(name, sm.at(when), 1, share)
				if q := d.Quotas[0]; !tracked && 2*q.Remaining <= q.Limit {
					n.share.Track(rule, name, uint32(s.Limit))
				}
				if d.Allowed {
					admitted[step]++
					perNode[i]++
					if key == 0 {
						topKey[step/1000]++
					}
				}
			}
		}
	}
	res := Result{Scenario: s, Admitted: perNode}
	norm := float64(s.Limit)
	for sec := range s.Seconds {
		a, o := int64(0), int64(0)
		for _, x := range admitted[sec*1000 : (sec+1)*1000] {
			a += x
		}
		for _, x := range asked[sec*1000 : (sec+1)*1000] {
			o += x
		}
		res.PerSecond = append(res.PerSecond, float64(a)/norm)
		res.OfferedPerSecond = append(res.OfferedPerSecond, float64(o)/norm)
		if s.Keys > 1 {
			res.TopKeyPerSecond = append(res.TopKeyPerSecond, float64(topKey[sec])/norm)
		}
	}
	if s.Keys == 1 {
		for start := int64(1000); start+1000 <= steps; start += 10 {
			a := int64(0)
			for _, x := range admitted[start : start+1000] {
				a += x
			}
			res.MaxWindow = max(res.MaxWindow, float64(a)/norm)
		}
	}
	res.BytesPerNodeSecond = float64(sm.bytes) / float64(s.Nodes) / float64(s.Seconds)
	if sm.reports > 0 {
		res.EntriesPerReport = float64(sm.entries) / float64(sm.reports)
	}
	return res
}

// Table formats r, one line per second.
func (r Result) Table() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%d nodes, %d key(s), offered %.1f×L, %.0f B/node/s, %.1f entries/report, max 1s window %.3f)\n",
		r.Scenario.Name, r.Scenario.Nodes, r.Scenario.Keys, r.Scenario.Offered, r.BytesPerNodeSecond, r.EntriesPerReport, r.MaxWindow)
	for i, x := range r.PerSecond {
		fmt.Fprintf(&b, "  %2ds  admitted/L %.3f  offered/L %.2f", i, x, r.OfferedPerSecond[i])
		if r.TopKeyPerSecond != nil {
			fmt.Fprintf(&b, "  top key %.3f", r.TopKeyPerSecond[i])
		}
		b.WriteByte('\n')
	}
	return b.String()
}
