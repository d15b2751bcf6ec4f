package accuracy

import (
	"math"
	"math/rand/v2"
	"slices"
	"time"
)

// request is one request of a trace: 16 bytes.
type request struct {
	at  int64  // ns after the trace's start
	src uint32 // the source, 0 ≤ src < Params.Sources
}

// burstMin to burstMax and silenceMin to silenceMax are the default bursts
// and silences, as in limiter/accuracy_test.go.
const (
	burstMin, burstMax     = 5 * time.Second, 60 * time.Second
	silenceMin, silenceMax = 10 * time.Second, 120 * time.Second
)

// cycle is p's bursts and silences, defaults filled in.
func cycle(p Params) (burst, silence [2]time.Duration) {
	burst, silence = p.Burst, p.Silence
	if burst == [2]time.Duration{} {
		burst = [2]time.Duration{burstMin, burstMax}
	}
	if silence == [2]time.Duration{} {
		silence = [2]time.Duration{silenceMin, silenceMax}
	}
	return burst, silence
}

// abusiveSources is how many of p's sources are abusive: the last ones.
func abusiveSources(p Params) int {
	return int(math.Round(p.AbusiveShare * float64(p.Sources)))
}

// trace is p's deterministic trace, sorted by time: at least p.Requests
// requests (a few percent more), every source's bursts over a span found
// by span.
func trace(p Params) []request {
	end := span(p)
	for {
		if tr := traceOver(p, end); len(tr) >= p.Requests {
			return sortByTime(tr)
		}
		end += end / 20 // short by chance: rare but for few sources
	}
}

// span is a trace length at which p's sources send about 3% more than
// p.Requests requests on average: the sources' rates times the time they
// spend in bursts, found by bisection. The time in bursts is measured on a
// sample of 20,000 sources' cycles (its own seed): with the arrivals, it
// has no simple formula. (A burst's rate is drawn apart from its length,
// so a source's expected requests are its mean rate times its time in
// bursts.)
func span(p Params) int64 {
	abusive := float64(abusiveSources(p))
	perSecond := (float64(p.Sources)-abusive)*(p.Lo+p.Hi)/2 + abusive*(p.AbusiveLo+p.AbusiveHi)/2
	want := 1.03 * float64(p.Requests)
	count := func(end int64) float64 { return perSecond * burstTime(p, end, 20_000, p.Seed^0x5eed) }
	lo, hi := int64(0), int64(time.Second)
	for count(hi) < want {
		lo, hi = hi, 2*hi
	}
	for hi-lo > hi/10_000 {
		mid := lo + (hi-lo)/2
		if count(mid) < want {
			lo = mid
		} else {
			hi = mid
		}
	}
	return hi
}

// burstTime is the mean time, in seconds, that n sources arriving and
// cycling as traceOver's spend in bursts before end.
func burstTime(p Params, end int64, n int, seed uint64) float64 {
	rng := rand.New(rand.NewPCG(seed, 1))
	burst, silence := cycle(p)
	total := int64(0)
	for range n {
		t := int64(rng.Float64() * float64(end) / 2)
		for t < end {
			on := min(t+between(rng, burst), end)
			total += on - t
			t = on + between(rng, silence)
		}
	}
	return float64(total) / float64(n) / float64(time.Second)
}

// traceOver is the requests of p's sources over [0, end), unsorted. Each
// source arrives at a time drawn uniformly from the first half of the
// span, with a burst, and then alternates silences and bursts to the end;
// a burst is Poisson, at a rate drawn for it. (Sources that arrive over
// time make every source active in a trace many windows long although
// they send 100 requests each on average: one over a limit of 100 a
// minute is active for a minute or so in all.)
func traceOver(p Params, end int64) []request {
	rng := rand.New(rand.NewPCG(p.Seed, 1))
	burst, silence := cycle(p)
	firstAbusive := p.Sources - abusiveSources(p)
	out := make([]request, 0, p.Requests*21/20)
	for src := range p.Sources {
		lo, hi := p.Lo, p.Hi
		if src >= firstAbusive {
			lo, hi = p.AbusiveLo, p.AbusiveHi
		}
		t := int64(rng.Float64() * float64(end) / 2)
		for t < end {
			on := t + between(rng, burst)
			perNs := (lo + (hi-lo)*rng.Float64()) / float64(time.Second)
			for {
				t += int64(rng.ExpFloat64() / perNs)
				if t >= on || t >= end {
					break
				}
				out = append(out, request{t, uint32(src)})
			}
			t = on + between(rng, silence)
		}
	}
	return out
}

// between is a duration in [d[0], d[1]], uniform, in ns.
func between(rng *rand.Rand, d [2]time.Duration) int64 {
	return int64(d[0]) + rng.Int64N(int64(d[1]-d[0])+1)
}

// sortByTime returns rs sorted by time, in a new slice: a counting sort
// into buckets of about 8 requests each (times are about uniform over the
// span), then each bucket by comparison. Linear, and several times faster
// than one big sort.
func sortByTime(rs []request) []request {
	if len(rs) < 2 {
		return rs
	}
	last := int64(0)
	for _, r := range rs {
		last = max(last, r.at)
	}
	buckets := len(rs)/8 + 1
	width := last/int64(buckets) + 1 // bucket of t: t/width < buckets
	start := make([]int32, buckets+1)
	for _, r := range rs {
		start[r.at/width+1]++
	}
	for i := 1; i <= buckets; i++ {
		start[i] += start[i-1]
	}
	sorted := make([]request, len(rs))
	next := slices.Clone(start[:buckets])
	for _, r := range rs {
		b := r.at / width
		sorted[next[b]] = r
		next[b]++
	}
	for b := range buckets {
		slices.SortFunc(sorted[start[b]:start[b+1]], func(x, y request) int {
			return cmpInt64(x.at, y.at)
		})
	}
	return sorted
}

// cmpInt64 is cmp.Compare for int64.
func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
