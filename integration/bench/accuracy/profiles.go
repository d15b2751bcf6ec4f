package accuracy

import (
	"fmt"
	"strings"
	"time"
)

// Profiles is the standard set: at least 10,000,000 requests from 100,000
// sources (100 a source on average), at 10 per second and at 100 per
// minute, each near the limit, overloaded, and mostly under the limit with
// 1% of the sources abusing it (closer to real traffic). Rates are in
// multiples of the limit's rate r (Count/Window):
//
//   - near the limit: bursts at 0.1r to 0.8r (10/s) or 0.12r to 1.5r
//     (100/min), which the log denies about 4% and 3% of;
//   - overloaded: bursts at 0.3r to 3r, which the log denies about half
//     and a quarter of;
//   - mostly under, 1% abusive: bursts at 0.05r to 0.5r, and at 2r to 20r
//     for the abusive sources, whose excess the log denies (about a
//     quarter of all requests).
//
// At 10 per second, bursts last 1–10s and silences 10–60s; at 100 per
// minute, bursts last 5–60s and silences 10–40 minutes, so that a source
// sending 100 requests in all is spread over a trace of many windows.
func Profiles() []Params {
	const s, m = time.Second, time.Minute
	perSecond := Params{Limit: 10, Window: s, Burst: [2]time.Duration{s, 10 * s}, Silence: [2]time.Duration{10 * s, 60 * s}}
	perMinute := Params{Limit: 100, Window: m, Burst: [2]time.Duration{5 * s, 60 * s}, Silence: [2]time.Duration{10 * m, 40 * m}}
	ps := []Params{
		rates(perSecond, "near the limit", 0.1, 0.8),
		rates(perSecond, "overloaded", 0.3, 3),
		rates(perMinute, "near the limit", 0.12, 1.5),
		rates(perMinute, "overloaded", 0.3, 3),
		abusive(rates(perSecond, "mostly under, 1% abusive", 0.05, 0.5), 0.01, 2, 20),
		abusive(rates(perMinute, "mostly under, 1% abusive", 0.05, 0.5), 0.01, 2, 20),
	}
	for i := range ps {
		ps[i].Requests, ps[i].Sources, ps[i].Seed = 10_000_000, 100_000, uint64(i+1)
	}
	return ps
}

// rates is p named name, its sources' bursts at lo to hi times its
// limit's rate.
func rates(p Params, name string, lo, hi float64) Params {
	r := float64(p.Limit) / p.Window.Seconds()
	p.Name, p.Lo, p.Hi = name, lo*r, hi*r
	return p
}

// abusive is p with a share of abusive sources, bursting at lo to hi
// times its limit's rate.
func abusive(p Params, share, lo, hi float64) Params {
	r := float64(p.Limit) / p.Window.Seconds()
	p.AbusiveShare, p.AbusiveLo, p.AbusiveHi = share, lo*r, hi*r
	return p
}

// Table is rs as a Markdown table, one row each.
func Table(rs []Result) string {
	var b strings.Builder
	b.WriteString("| profile | limit | requests | active sources | span | denied by the log | wrongly allowed | wrongly denied | decided differently | time |\n")
	b.WriteString("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, r := range rs {
		fmt.Fprintf(&b, "| %s | %v | %d | %d | %v | %.2f%% | %d | %d | %.4f%% | %v |\n",
			r.Params.Name, r.Params.limit(), r.Requests, r.ActiveSources, r.Span.Round(time.Second),
			100*r.DeniedShare(), r.WronglyAllowed, r.WronglyDenied, 100*r.Share(), r.Elapsed.Round(100*time.Millisecond))
	}
	return b.String()
}
