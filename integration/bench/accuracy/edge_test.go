package accuracy

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edgebyte/edgelimit/limiter"
)

// An experiment, not a check of the code: can a sliding window counter,
// in O(1) memory a key, bound what a client timing its bursts at a
// window's edge gets (2N−1 for the default) well below 2N, at a cost to
// honest clients under 3% of their limit? It compares, at three limits:
//
//   - the default, and the default with a burst bucket in front (the
//     existing `burst B`), both through package limiter;
//   - gated buckets (written here, not in limiter): the same bucket of
//     capacity B, but it may deny only while the previous window's count
//     is over B ("by prev"), or only while the two windows' counts and
//     the request are over N+B ("by prev+curr"); its TAT advances on
//     every admission, gate or not. Take a span of one window, crossing
//     windows k−1 and k, and its last admission. If the bucket was
//     consulted and passed, its TAT had advanced W/N for each of the
//     span's admissions from the span's start on, and ended within B
//     units of the last one's time, less than a window after the start:
//     at most N+B−1 in all. If not: by prev, at most prev ≤ B from k−1
//     and N from k; by prev+curr, prev+curr+1 ≤ N+B. Either way N+B.
//
// Worst case: the most admitted in a half-open span of one window over
// the boundary stage's attack, a greedy prober, prepared bursts and
// random schedules. Honest cost: the share of its limit a client paced at
// the limit's rate gets (with ±0.5% jitter), and, on the accuracy
// package's bursty traces (a twentieth of Profiles), the requests the
// exact log admits and the variant denies, per 100 the log admits: for
// every source near the limit, for the ordinary sources of "mostly
// under". Run it with
//
//	EDGELIMIT_EDGE_EXPERIMENT=1 go test -run TestEdgeExperiment -v ./accuracy
func TestEdgeExperiment(t *testing.T) {
	if os.Getenv("EDGELIMIT_EDGE_EXPERIMENT") == "" {
		t.Skip("an experiment: set EDGELIMIT_EDGE_EXPERIMENT=1")
	}
	for _, l := range []limiter.Limit{{Count: 10, Window: time.Second}, {Count: 20, Window: 2 * time.Second}, {Count: 100, Window: time.Minute}} {
		n := l.Count
		var b strings.Builder
		fmt.Fprintf(&b, "\nlimit %v\n| variant | bytes/key | worst in one window | × N | paced at the rate | at 0.95× | near the limit: denied of 100 the log admits | mostly under, ordinary sources: same |\n|---|---|---|---|---|---|---|---|\n", l)
		for _, v := range edgeVariants(n) {
			worst := worstCase(v, l)
			paced, slower := pacedShare(v, l, 1), pacedShare(v, l, 0.95)
			near, under := "—", "—"
			for _, p := range Profiles() {
				if p.Limit != n || p.Window != l.Window {
					continue
				}
				switch {
				case strings.HasPrefix(p.Name, "near"):
					near = fmt.Sprintf("%.2f", 100*costOn(v, p, false))
				case strings.HasPrefix(p.Name, "mostly"):
					under = fmt.Sprintf("%.2f", 100*costOn(v, p, true))
				}
			}
			fmt.Fprintf(&b, "| %s | %d | %d | %.2f | %.1f%% | %.1f%% | %s | %s |\n", v.name, v.bytes, worst, float64(worst)/float64(n), 100*paced, 100*slower, near, under)
		}
		t.Log(b.String())
	}
}

// A decider decides requests of sources 0… at times in ns (not going back
// for a source).
type decider interface {
	allow(src uint32, t int64) bool
}

// An edgeVariant makes fresh deciders of one algorithm for sources sources.
type edgeVariant struct {
	name  string
	bytes int // state per key, beyond its hash
	make  func(l limiter.Limit, sources int) decider
}

func edgeVariants(n int64) []edgeVariant {
	lib := func(algo limiter.Algorithm, burst int64) func(limiter.Limit, int) decider {
		return func(l limiter.Limit, sources int) decider {
			lim, err := limiter.New(limiter.Config{Algorithm: algo, Limits: []limiter.Limit{l}, Burst: burst, MaxKeys: 2*sources + 16})
			if err != nil {
				panic(err)
			}
			keys := make([]string, sources)
			for i := range keys {
				keys[i] = strconv.Itoa(i)
			}
			return libDecider{lim, keys}
		}
	}
	vs := []edgeVariant{{name: "sliding_window (default)", bytes: 16, make: lib(limiter.SlidingWindow, 0)}}
	for _, d := range []int64{2, 4, 10} {
		if b := n / d; b >= 1 {
			vs = append(vs, edgeVariant{name: fmt.Sprintf("sliding_window, burst N/%d = %d", d, b), bytes: 32, make: lib(limiter.SlidingWindow, b)})
		}
	}
	for _, d := range []int64{4, 10} {
		if b := n / d; b >= 1 {
			vs = append(vs, edgeVariant{name: fmt.Sprintf("sliding_window, bucket gated by prev, N/%d = %d", d, b), bytes: 32, make: func(l limiter.Limit, sources int) decider {
				return newGated(l, sources, b, b)
			}})
		}
	}
	for _, d := range []int64{2, 4, 10} {
		if b := n / d; b >= 1 {
			vs = append(vs, edgeVariant{name: fmt.Sprintf("sliding_window, bucket gated by prev+curr, N/%d = %d", d, b), bytes: 32, make: func(l limiter.Limit, sources int) decider {
				g := newGated(l, sources, b, b)
				g.byCount = true
				return g
			}})
		}
	}
	return append(vs, edgeVariant{name: "sliding_log", bytes: 16 * int(n), make: lib(limiter.SlidingLog, 0)})
}

type libDecider struct {
	lim  *limiter.Limiter
	keys []string
}

func (d libDecider) allow(src uint32, t int64) bool {
	return d.lim.AllowAt(d.keys[src], base.Add(time.Duration(t)), 1).Allowed
}

// gated is the sliding window counter (as limiter's: prev×(w−e) +
// curr×w ≤ n×w, compared exactly) with a GCRA bucket of capacity b at n
// per w that may deny only while prev > gate (or, byCount, while
// prev+curr+1 > n+b); its TAT (kept in n-ths of a nanosecond, exact)
// advances on every admission. gate −1: always on, which is limiter's
// burst bucket (TestGatedIsLimiter).
type gated struct {
	n, w, b, gate int64
	// byCount: the bucket may deny only while prev+curr+1 > n+b instead.
	byCount    bool
	start, tat []int64
	prev, curr []int64
}

func newGated(l limiter.Limit, sources int, b, gate int64) *gated {
	return &gated{n: l.Count, w: int64(l.Window), b: b, gate: gate,
		start: make([]int64, sources), tat: make([]int64, sources), prev: make([]int64, sources), curr: make([]int64, sources)}
}

func (g *gated) allow(src uint32, t int64) bool {
	cur := t / g.w * g.w
	if s := g.start[src]; s != cur {
		if s == cur-g.w {
			g.prev[src] = g.curr[src]
		} else {
			g.prev[src] = 0
		}
		g.curr[src], g.start[src] = 0, cur
	}
	prev, curr := g.prev[src], g.curr[src]
	if prev*(g.w-(t-cur))+(curr+1)*g.w > g.n*g.w {
		return false
	}
	tn := t * g.n
	from := max(g.tat[src], tn)
	shut := prev > g.gate
	if g.byCount {
		shut = prev+curr+1 > g.n+g.b
	}
	if shut && from+g.w-tn > g.b*g.w {
		return false
	}
	g.curr[src]++
	g.tat[src] = from + g.w
	return true
}

// TestGatedIsLimiter: gated with its gate always on decides as limiter's
// sliding window with a burst bucket, on random schedules (the check on
// this file's own counter).
func TestGatedIsLimiter(t *testing.T) {
	l := limiter.Limit{Count: 20, Window: 2 * time.Second}
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 200 {
		lim, _ := limiter.New(limiter.Config{Limits: []limiter.Limit{l}, Burst: 5})
		g := newGated(l, 1, 5, -1)
		for i, at := range randomSchedule(rng, l) {
			if a, b := lim.AllowAt("k", base.Add(time.Duration(at)), 1).Allowed, g.allow(0, at); a != b {
				t.Fatalf("trial %d, request %d at %d: limiter %v, gated %v", trial, i, at, a, b)
			}
		}
	}
}

// TestGatedBound: the gated buckets never admit more than N+B in one
// window's span, whatever the schedule tried.
func TestGatedBound(t *testing.T) {
	l := limiter.Limit{Count: 20, Window: 2 * time.Second}
	for _, byCount := range []bool{false, true} {
		v := edgeVariant{make: func(l limiter.Limit, sources int) decider {
			g := newGated(l, sources, 5, 5)
			g.byCount = byCount
			return g
		}}
		if worst := worstCase(v, l); worst > 25 {
			t.Errorf("gated N/4, by count %v: %d in one window, over N+B = 25", byCount, worst)
		}
	}
}

// edge is a window edge of l far from the epoch, in the replay's time.
func edge(l limiter.Limit) int64 { return 1000 * int64(l.Window) }

// worstCase is the most v admits to one key in a half-open span of one
// window, over every schedule tried.
func worstCase(v edgeVariant, l limiter.Limit) int64 {
	n, w := l.Count, int64(l.Window)
	unit := w / n
	e := edge(l)
	var schedules [][]int64
	burst := func(at int64, k int64) []int64 { return slices.Repeat([]int64{at}, int(k)) }
	probe := func(from, to, step int64) []int64 {
		var s []int64
		for at := from; at < to; at += step {
			s = append(s, at)
		}
		return s
	}
	// The boundary stage's attack, at a finer pace.
	for _, lead := range []int64{1, unit / 2, w / 40} {
		s := append(burst(e-lead, n+5), burst(e+int64(5*time.Millisecond), n+5)...)
		schedules = append(schedules, append(s, probe(e+1, e+2*w, max(unit/16, 1))...))
	}
	// Prepared: p spread over the window before, x at some point of the
	// last window before the edge, then a greedy prober for two windows.
	for _, p := range []int64{0, n / 10, n / 4, n / 2, n} {
		for _, x := range []int64{n / 4, n / 2, n, n + 5} {
			for _, at := range []int64{e - 1, e - w/10, e - w/2, e - w + 1} {
				var s []int64
				if p > 0 {
					s = probe(e-2*w, e-w, w/p)
				}
				s = append(s, burst(at, x)...)
				s = append(s, probe(at+1, e+2*w, max(unit/16, 1))...)
				schedules = append(schedules, s)
			}
		}
	}
	rng := rand.New(rand.NewPCG(uint64(n), uint64(w)))
	for range 3000 {
		schedules = append(schedules, randomSchedule(rng, l))
	}
	best := int64(0)
	for _, s := range schedules {
		slices.Sort(s)
		d := v.make(l, 1)
		var ok []int64
		for _, at := range s {
			if d.allow(0, at) {
				ok = append(ok, at)
			}
		}
		for i, j := 0, 0; i < len(ok); i++ { // spans [ok[i], ok[i]+w)
			for j < len(ok) && ok[j] < ok[i]+w {
				j++
			}
			best = max(best, int64(j-i))
		}
	}
	return best
}

// randomSchedule is bursts at random times over four windows, most of
// them within a few units of an edge, and scattered requests.
func randomSchedule(rng *rand.Rand, l limiter.Limit) []int64 {
	n, w := l.Count, int64(l.Window)
	unit, e := w/n, edge(l)
	var s []int64
	for range 1 + rng.IntN(8) {
		at := e - w + rng.Int64N(4*w)
		if rng.IntN(3) > 0 {
			at = e + int64(rng.IntN(4)-1)*w + rng.Int64N(4*unit) - 2*unit
		}
		for range 1 + rng.Int64N(2*n) {
			s = append(s, at+rng.Int64N(unit/4+1))
		}
	}
	for range rng.Int64N(8 * n) {
		s = append(s, e-w+rng.Int64N(4*w))
	}
	slices.Sort(s)
	return s
}

// pacedShare is the share a client sending at f times the limit's rate,
// each request within ±0.5% of its time, gets of what it sends over 200
// windows, averaged over 20 phases.
func pacedShare(v edgeVariant, l limiter.Limit, f float64) float64 {
	n, w := l.Count, int64(l.Window)
	unit := int64(float64(w/n) / f)
	rng := rand.New(rand.NewPCG(3, uint64(n)))
	var sent, ok int
	for range 20 {
		d := v.make(l, 1)
		phase := rng.Int64N(w)
		last := int64(0)
		for i := range 200 * n {
			at := edge(l) + phase + i*unit + rng.Int64N(unit/100+1) - unit/200
			at = max(at, last)
			last = at
			sent++
			if d.allow(0, at) {
				ok++
			}
		}
	}
	return float64(ok) / float64(sent)
}

// costOn replays a twentieth of p through v and an exact log: the share
// of the requests the log admits that v denies; ordinary: only the
// sources that are not abusive.
func costOn(v edgeVariant, p Params, ordinary bool) float64 {
	p.Requests, p.Sources = p.Requests/20, p.Sources/20
	tr := trace(p)
	d := v.make(p.limit(), p.Sources)
	exact := newExactLog(p.Sources, int(p.Limit), int64(p.Window))
	honest := uint32(p.Sources - abusiveSources(p))
	var admitted, denied int
	for _, q := range tr {
		a, e := d.allow(q.src, q.at), exact.allow(q.src, q.at)
		if ordinary && q.src >= honest {
			continue
		}
		if e {
			admitted++
			if !a {
				denied++
			}
		}
	}
	return float64(denied) / float64(max(admitted, 1))
}
