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

// SlotScenario is a run of a concurrency rule (max_concurrent N) on one
// key: requests arrive at the nodes (Poisson), each is admitted if its
// node's limiter.InFlight has fewer than the node's cap in flight
// (gossip.Sharing.Slots), and holds its place for an exponential time.
type SlotScenario struct {
	Name    string
	Nodes   int     // default 3
	Seconds int     // default 10
	N       int64   // max_concurrent, over the fleet; default 30
	Offered float64 // requests in flight wanted (arrival rate × mean hold), × N; default 1.5
	// Weights is each node's part of the arrivals; default even.
	Weights []float64
	// Hold is the mean time a request is in flight. Default 50ms.
	Hold time.Duration
	Seed uint64 // default 1
	// Latency is the one-way delay of a message, plus up to Jitter more.
	// Defaults: 5ms and 5ms.
	Latency, Jitter time.Duration
	// KillAt: if set, node 0 dies then, with its requests in flight; its
	// arrivals are spread over the others in their proportions.
	KillAt time.Duration
}

// SlotResult is what a SlotScenario gave.
type SlotResult struct {
	Scenario SlotScenario
	// MaxEveryMs is the most requests in flight over the fleet at once,
	// over N, checked every millisecond from the second second on.
	MaxEveryMs float64
	// Max100ms and Mean100ms are the fleet's requests in flight sampled
	// every 100ms from the second second on: the most and the mean, over N.
	Max100ms, Mean100ms float64
	// Caps is the nodes' caps at the end of the run.
	Caps []int64
	// Reclaimed is how long after KillAt the live nodes' caps first summed
	// to N (0: never, or no kill).
	Reclaimed time.Duration
	// Admitted and Refused count the requests over the run.
	Admitted, Refused int64
}

type slotNode struct {
	name  string
	f     *limiter.InFlight
	share *gossip.Sharing
	dead  bool
}

// release is a request ending on node, giving its place back.
type release struct {
	node int
	slot *limiter.Slot
}

func (s *SlotScenario) defaults() {
	orDefault(&s.Nodes, 3)
	orDefault(&s.Seconds, 10)
	orDefault(&s.N, 30)
	orDefault(&s.Offered, 1.5)
	if s.Weights == nil {
		for range s.Nodes {
			s.Weights = append(s.Weights, 1)
		}
	}
	orDefault(&s.Hold, 50*time.Millisecond)
	orDefault(&s.Seed, 1)
	orDefault(&s.Latency, 5*time.Millisecond)
	orDefault(&s.Jitter, 5*time.Millisecond)
}

// RunSlots runs s.
func RunSlots(s SlotScenario) SlotResult {
	s.defaults()
	rng := rand.New(rand.NewPCG(s.Seed, 0xc0c0))
	const key = "k"
	rule := gossip.KeyHash("sim-slots")
	interval := gossip.DefaultSyncInterval
	var nodes []*slotNode
	for i := range s.Nodes {
		f := limiter.NewInFlight(0)
		name := fmt.Sprintf("node-%03d", i)
		sh := gossip.NewSharing(gossip.SharingConfig{Self: name, Interval: interval})
		sh.SetClusterSize(s.Nodes)
		sh.SetRules([]gossip.Rule{{Name: "sim-slots", Concurrent: f.TakePeak}})
		nodes = append(nodes, &slotNode{name: name, f: f, share: sh})
	}
	net := network{rng: rng, latency: s.Latency, jitter: s.Jitter}
	var rel timeline[release]
	qseq := int64(0)
	ms := int64(time.Millisecond)
	steps := int64(s.Seconds) * 1000
	iv := interval.Milliseconds()
	rate := s.Offered * float64(s.N) / s.Hold.Seconds() // arrivals per second, fleet
	n := uint32(s.N)
	res := SlotResult{Scenario: s}
	samples, sum := 0, 0.0
	sm := &sim{rng: rng}
	for step := range steps {
		now := step * ms
		t := time.Duration(now)
		if s.KillAt > 0 && t >= s.KillAt && !nodes[0].dead {
			nodes[0].dead = true
		}
		for rel.dueBefore(now + ms) {
			if r := rel.next().v; !nodes[r.node].dead {
				r.slot.Release()
			}
		}
		net.deliver(now+ms, func(to int, r gossip.Report, when int64) {
			if !nodes[to].dead {
				nodes[to].share.Observe(r, at(when))
			}
		})
		w := slotWeights(s, nodes)
		for i, nd := range nodes {
			if nd.dead {
				continue
			}
			if (step-int64(i)*iv/int64(s.Nodes))%iv == 0 {
				r := nd.share.Tick(at(now))
				for j, m := range nodes {
					if j == i || m.dead {
						continue
					}
					net.send(now, j, r)
				}
			}
			for range sm.poisson(rate * w[i] / 1000) {
				c, tracked := nd.share.Slots(rule, key, n)
				slot, ok, in := nd.f.AcquireScaled(key, c)
				if !ok {
					res.Refused++
					nd.share.Refused(rule, key, n)
					continue
				}
				res.Admitted++
				if !tracked && 2*in >= c {
					nd.share.Track(rule, key, n)
				}
				held := new(limiter.Slot)
				*held = slot
				qseq++
				hold := int64(rng.ExpFloat64() * float64(s.Hold))
				rel.add(now+max(hold, 1), qseq, release{node: i, slot: held})
			}
		}
		fleet, caps := int64(0), int64(0)
		for _, nd := range nodes {
			if !nd.dead {
				fleet += nd.f.Total()
				c, _ := nd.share.Slots(rule, key, n)
				caps += c
			}
		}
		if s.KillAt > 0 && t >= s.KillAt && res.Reclaimed == 0 && caps >= s.N {
			res.Reclaimed = max(t-s.KillAt, time.Millisecond)
		}
		if step < 1000 {
			continue
		}
		x := float64(fleet) / float64(s.N)
		res.MaxEveryMs = max(res.MaxEveryMs, x)
		if step%100 == 0 {
			samples++
			sum += x
			res.Max100ms = max(res.Max100ms, x)
		}
	}
	if samples > 0 {
		res.Mean100ms = sum / float64(samples)
	}
	for _, nd := range nodes {
		c, _ := nd.share.Slots(rule, key, n)
		if nd.dead {
			c = 0
		}
		res.Caps = append(res.Caps, c)
	}
	return res
}

// slotWeights is each node's part of the arrivals, a dead node's spread
// over the others.
func slotWeights(s SlotScenario, nodes []*slotNode) []float64 {
	w := make([]float64, len(nodes))
	total := 0.0
	for i, nd := range nodes {
		if !nd.dead {
			w[i] = s.Weights[i]
			total += w[i]
		}
	}
	for i := range w {
		w[i] /= math.Max(total, 1e-12)
	}
	return w
}

// String formats r on one line.
func (r SlotResult) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: in flight/N max %.3f (every ms %.3f), mean %.3f; caps at the end %v; admitted %d refused %d",
		r.Scenario.Name, r.Max100ms, r.MaxEveryMs, r.Mean100ms, r.Caps, r.Admitted, r.Refused)
	if r.Scenario.KillAt > 0 {
		fmt.Fprintf(&b, "; node 0 killed at %s, its share reclaimed in %s", r.Scenario.KillAt, r.Reclaimed)
	}
	return b.String()
}
