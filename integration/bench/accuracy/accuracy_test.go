package accuracy

import (
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/edgebyte/edgelimit/limiter"
)

// small is the profiles at test scale: 200,000 requests from 2,000
// sources (100 a source, as at full scale).
func small() []Params {
	ps := Profiles()
	for i := range ps {
		ps[i].Requests, ps[i].Sources = 200_000, 2_000
	}
	return ps
}

// The trace is what Run promises: sorted, at least as long as asked, every
// source in range and active, and the same for the same seed.
func TestTrace(t *testing.T) {
	for _, p := range small() {
		tr := trace(p)
		if len(tr) < p.Requests || len(tr) > p.Requests*5/4 {
			t.Errorf("%s, %d/%v: %d requests, want %d to 25%% more", p.Name, p.Limit, p.Window, len(tr), p.Requests)
		}
		active := map[uint32]bool{}
		for i, r := range tr {
			if i > 0 && r.at < tr[i-1].at {
				t.Fatalf("request %d at %d, before the previous one at %d", i, r.at, tr[i-1].at)
			}
			if r.at < 0 || int(r.src) >= p.Sources {
				t.Fatalf("request %d: %+v out of range", i, r)
			}
			active[r.src] = true
		}
		if len(active) < p.Sources*99/100 {
			t.Errorf("%s, %d/%v: %d of %d sources active", p.Name, p.Limit, p.Window, len(active), p.Sources)
		}
	}
	p := small()[0]
	tr, again := trace(p), trace(p)
	for i := range tr {
		if tr[i] != again[i] {
			t.Fatalf("request %d: %+v, then %+v: not deterministic", i, tr[i], again[i])
		}
	}
}

// The log is exact, checked by brute force on a few sources of every
// profile: no window (t−W, t] holds more than Limit admissions, and every
// denied request had Limit admissions in its window (the log denies only
// what it must).
func TestExactLog(t *testing.T) {
	for _, p := range small() {
		tr := trace(p)
		log := newExactLog(p.Sources, int(p.Limit), int64(p.Window))
		const checked = 5 // sources 0 to 4, and the last 5 (abusive, if any)
		pick := func(src uint32) int {
			switch {
			case src < checked:
				return int(src)
			case int(src) >= p.Sources-checked:
				return int(src) - p.Sources + 2*checked
			}
			return -1
		}
		admitted := make([][]int64, 2*checked)
		denied := make([][]int64, 2*checked)
		for _, r := range tr {
			ok := log.allow(r.src, r.at)
			if i := pick(r.src); i >= 0 && ok {
				admitted[i] = append(admitted[i], r.at)
			} else if i >= 0 {
				denied[i] = append(denied[i], r.at)
			}
		}
		w := int64(p.Window)
		inWindow := func(times []int64, t int64) int { // admissions in (t−W, t]
			n := 0
			for _, a := range times {
				if a > t-w && a <= t {
					n++
				}
			}
			return n
		}
		nDenied := 0
		for i := range admitted {
			for _, a := range admitted[i] {
				if n := inWindow(admitted[i], a); n > int(p.Limit) {
					t.Errorf("%s, %d/%v: a source admitted %d in the window ending %d", p.Name, p.Limit, p.Window, n, a)
				}
			}
			for _, d := range denied[i] {
				if n := inWindow(admitted[i], d); n != int(p.Limit) {
					t.Errorf("%s, %d/%v: a source denied at %d with %d in its window", p.Name, p.Limit, p.Window, d, n)
				}
			}
			nDenied += len(denied[i])
		}
		if p.Name == "overloaded" && nDenied == 0 {
			t.Errorf("%s, %d/%v: the checked sources were never denied: the check proved little", p.Name, p.Limit, p.Window)
		}
	}
}

// The sliding window agrees with the log on most requests, and the counts
// add up. The bounds are loose: about twice the shares measured.
func TestRun(t *testing.T) {
	bounds := []float64{0.08, 0.5, 0.04, 0.1, 0.08, 0.015}
	for i, p := range small() {
		r := Run(p)
		t.Log(r)
		if r.Requests < p.Requests || r.ActiveSources < p.Sources*99/100 {
			t.Errorf("%s: %d requests from %d sources, want %d from about %d", p.Name, r.Requests, r.ActiveSources, p.Requests, p.Sources)
		}
		if r.AllowedWindow-r.AllowedLog != r.WronglyAllowed-r.WronglyDenied {
			t.Errorf("%s: allowed %d by the window and %d by the log, but %d wrongly allowed and %d wrongly denied", p.Name, r.AllowedWindow, r.AllowedLog, r.WronglyAllowed, r.WronglyDenied)
		}
		if r.AllowedLog == r.Requests {
			t.Errorf("%s: the log denied nothing: the trace never reached the limit", p.Name)
		}
		if r.Evictions != 0 {
			t.Errorf("%s: %d keys evicted", p.Name, r.Evictions)
		}
		if r.Share() > bounds[i] {
			t.Errorf("%s, %d/%v: %.3f%% decided differently, want at most %.1f%%", p.Name, p.Limit, p.Window, 100*r.Share(), 100*bounds[i])
		}
	}
}

// The disagreement measured is the sliding window counter's own, not an
// artefact of edgelimit's: an independent counter, the formula written
// out (windows aligned to the epoch, count prev×(W−elapsed)/W + curr,
// allow if that plus one is at most the limit), decides every request of
// a trace as edgelimit's sliding_window does.
func TestWindowIsTheFormula(t *testing.T) {
	for _, p := range small()[:4] {
		tr := trace(p)
		l, err := limiter.New(limiter.Config{Limits: []limiter.Limit{p.limit()}, MaxKeys: 2 * p.Sources})
		if err != nil {
			t.Fatal(err)
		}
		type counter struct {
			window     int64 // index of the current window
			prev, curr float64
		}
		counters := make([]counter, p.Sources)
		for i := range counters {
			counters[i].window = -2
		}
		w := int64(p.Window)
		differ := 0
		for _, q := range tr {
			got := l.AllowAt("src-"+strconv.Itoa(int(q.src)), base.Add(time.Duration(q.at)), 1).Allowed
			c, now := &counters[q.src], base.UnixNano()+q.at
			if i := now / w; i != c.window {
				c.prev = 0
				if i == c.window+1 {
					c.prev = c.curr
				}
				c.window, c.curr = i, 0
			}
			want := c.prev*float64(w-now%w)/float64(w)+c.curr+1 <= float64(p.Limit)
			if want {
				c.curr++
			}
			if got != want {
				differ++
			}
		}
		if differ > 0 {
			t.Errorf("%s, %d/%v: %d of %d requests decided otherwise than the formula", p.Name, p.Limit, p.Window, differ, len(tr))
		}
	}
}

// TestPrintProfiles runs Profiles() and prints their table: a minute or
// two, so only with BENCH_ACCURACY=1.
func TestPrintProfiles(t *testing.T) {
	if os.Getenv("BENCH_ACCURACY") != "1" {
		t.Skip("set BENCH_ACCURACY=1 to run the full profiles")
	}
	var rs []Result
	for _, p := range Profiles() {
		r := Run(p)
		t.Log(r)
		rs = append(rs, r)
	}
	t.Logf("\n%s", Table(rs))
}
