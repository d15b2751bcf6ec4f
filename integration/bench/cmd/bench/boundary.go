package main

import (
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/edgebyte/edgelimit/limiter"
)

// The boundary stage: a client that times its bursts at the edges of the
// windows (aligned to the Unix epoch, so it knows where they fall), against
// each algorithm, end to end. A short window keeps the stage short.
const (
	boundaryLimit  = 20
	boundaryWindow = 2 * time.Second
	boundaryBurst  = 5 // the burst of the rows that have one: a quarter of the limit
	boundaryRounds = 3 // each a fresh key and an edge of its own
	// boundaryLead is how long before an edge the first burst is sent:
	// enough for it to be decided before the edge on a loaded machine.
	boundaryLead = 50 * time.Millisecond
	// boundaryAfter is how long after the edge the second burst is sent.
	boundaryAfter = 5 * time.Millisecond
	// boundaryExtra: each burst is the limit and this many requests more.
	boundaryExtra = 5
	// boundaryPace: after the bursts, a request every window/(pace×limit),
	// pace times the limit's rate, until the span that began with the first
	// burst is over.
	boundaryPace = 8
)

// A boundaryCase is one row: an algorithm and its burst (0: none).
type boundaryCase struct {
	Algorithm string
	Burst     int64
}

func (c boundaryCase) String() string {
	if c.Burst > 0 {
		return fmt.Sprintf("%s, burst %d", c.Algorithm, c.Burst)
	}
	return c.Algorithm
}

// path is the case's route on the server.
func (c boundaryCase) path() string { return "/" + c.Algorithm + "-" + strconv.FormatInt(c.Burst, 10) }

func boundaryCases() []boundaryCase {
	return []boundaryCase{
		{Algorithm: "sliding_window"},
		{Algorithm: "sliding_window", Burst: boundaryBurst},
		{Algorithm: "fixed_window"},
		{Algorithm: "fixed_window", Burst: boundaryBurst},
		{Algorithm: "sliding_log"},
		{Algorithm: "token_bucket"},
		{Algorithm: "leaky_bucket"},
	}
}

// boundaryBound is the most requests c admits within any half-open span
// [t, t+w) at a limit of n per w, as limiter's code allows, with the
// formula; maxDelay is leaky_bucket's (limiter.DefaultMaxDelay for the
// default). For leaky_bucket, served counts requests as they leave its
// queue (after their delay), and otherwise as they are decided.
//
//   - fixed_window: n in each aligned window, and a span meets two: 2n,
//     n just before an edge and n at it.
//   - sliding_window: prev×(w−e)/w + curr ≤ n. With prev ≥ 1 the estimate
//     is above curr until the window ends, so curr ≤ n−1 within it: 2n−1,
//     n just before an edge and then one each w/n, as prev's weight falls.
//   - sliding_log: exact, n in any (t−w, t].
//   - token_bucket: GCRA of capacity C (burst, default n) at n per w: the
//     m-th admission of a run is at least (m−C)×w/n after the first, so
//     C+n−1 in [t, t+w). A burst bucket in front of a window caps it the
//     same way: min(window's, B+n−1).
//   - leaky_bucket: a request passes if at most depth×w/n of work is
//     queued, depth = burst or max_delay×n/w, whichever is smaller: GCRA of
//     capacity depth+1, so depth+n decided; they leave w/n apart, so n
//     served.
func boundaryBound(c boundaryCase, n int64, w, maxDelay time.Duration, served bool) (int64, string) {
	bucket := func(window int64, formula string) (int64, string) {
		if c.Burst == 0 {
			return window, formula
		}
		return min(window, c.Burst+n-1), "min(" + formula + ", B + N − 1)"
	}
	switch limiter.Algorithm(c.Algorithm) {
	case limiter.FixedWindow:
		return bucket(2*n, "2N")
	case limiter.SlidingWindow, "":
		return bucket(2*n-1, "2N − 1")
	case limiter.SlidingLog:
		return bucket(n, "N")
	case limiter.TokenBucket:
		if c.Burst > 0 {
			return c.Burst + n - 1, "B + N − 1"
		}
		return 2*n - 1, "2N − 1 (capacity N)"
	case limiter.LeakyBucket:
		if served {
			return n, "N (one each W/N)"
		}
		depth := int64(maxDelay) * n / int64(w)
		formula := fmt.Sprintf("depth + N, depth = max_delay×N/W = %d", depth)
		if c.Burst > 0 && c.Burst < depth {
			depth, formula = c.Burst, "B + N"
		}
		return depth + n, formula
	}
	return 0, "?"
}

// attackTimes is when the attacker sends for the edge at edge: a burst of
// n+boundaryExtra lead before it, another boundaryAfter after it, then a
// request every step = w/(boundaryPace×n), from step/2 after the edge,
// until the span of w that began with the first burst is over. The half
// step keeps a paced request off the instant one window after the first
// burst: a request sent there would be decided a little after it, and
// would count by its send (maxSent) in a span its decision is not in.
func attackTimes(edge time.Time, n int64, w, lead time.Duration) []time.Time {
	var at []time.Time
	for range n + boundaryExtra {
		at = append(at, edge.Add(-lead))
	}
	for range n + boundaryExtra {
		at = append(at, edge.Add(boundaryAfter))
	}
	step := w / time.Duration(boundaryPace*n)
	for t := edge.Add(step / 2); t.Before(edge.Add(w - lead + step)); t = t.Add(step) {
		at = append(at, t)
	}
	return at
}

// A shot is one request: when it was sent, when its response came back
// (for a limiter driven in virtual time: when it was decided, or for a
// leaky bucket's served requests, released), and whether it was admitted.
type shot struct {
	Sent, Done time.Time
	OK         bool
}

// maxWithin is the most admitted shots sent and done within one span
// [t, t+w): the server decided each of them within the span, so it
// admitted at least that many in one window's length.
func maxWithin(ss []shot, w time.Duration) int64 {
	var ok []shot
	for _, s := range ss {
		if s.OK {
			ok = append(ok, s)
		}
	}
	best := int64(0)
	for _, first := range ok { // a best span can start at some request's send
		end := first.Sent.Add(w)
		k := int64(0)
		for _, s := range ok {
			if !s.Sent.Before(first.Sent) && s.Done.Before(end) {
				k++
			}
		}
		best = max(best, k)
	}
	return best
}

// maxSent is the most admitted shots sent within one span [t, t+w).
func maxSent(ss []shot, w time.Duration) int64 {
	ss = slices.Clone(ss)
	for i := range ss {
		ss[i].Done = ss[i].Sent
	}
	return maxWithin(ss, w)
}

// boundaryRow is one case's results.
type boundaryRow struct {
	Case   boundaryCase
	Limit  int64
	Window time.Duration
	// Max is, per round, the most admitted within one window's length
	// (maxWithin): for leaky_bucket, served.
	Max            []int64
	Bound          int64
	Formula        string
	Decided        []int64 `json:",omitempty"` // leaky_bucket: by when they were sent (maxSent), per round
	DecidedBound   int64   `json:",omitempty"`
	DecidedFormula string  `json:",omitempty"`
	// The honest client: requests sent after its first window, and those
	// admitted.
	HonestSent, HonestAdmitted int64
	Other                      int64 // responses neither 200 nor 429, and transport errors
}

// boundaryHandlers is the server's route: one subroute per case, its rule
// keyed by X-Client, and static_response for anything else (the
// readiness probe, the warm-up).
func boundaryHandlers(cases []boundaryCase) []map[string]any {
	var routes []any
	for _, c := range cases {
		rule := map[string]any{
			"name":      strings.TrimPrefix(c.path(), "/"),
			"limits":    []any{map[string]any{"count": boundaryLimit, "window": boundaryWindow}},
			"algorithm": c.Algorithm,
			"by":        []string{"header X-Client"},
		}
		if c.Burst > 0 {
			rule["burst"] = c.Burst
		}
		routes = append(routes, map[string]any{
			"match":    []any{map[string]any{"path": []string{c.path()}}},
			"handle":   []any{map[string]any{"handler": "rate_limit", "rules": []any{rule}}, respond},
			"terminal": true,
		})
	}
	routes = append(routes, map[string]any{"handle": []any{respond}})
	return []map[string]any{{"handler": "subroute", "routes": routes}}
}

// runBoundary starts edgelimit's Caddy (every core) with every case's
// route, then, case after case and round after round, each on an edge of
// its own, attacks a fresh key; an honest client per case sends at the
// limit's rate on a key of its own all along.
func runBoundary(binDir, dir string) ([]boundaryRow, error) {
	work, err := os.MkdirTemp(dir, "boundary-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)
	cases := boundaryCases()
	s, err := start(edgelimit.path(binDir), boundaryHandlers(cases), -1, work)
	if err != nil {
		return nil, err
	}
	defer s.stop()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1024}, Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()

	// Open the bursts' connections before the first one.
	var wg sync.WaitGroup
	for range 4 * (boundaryLimit + boundaryExtra) {
		wg.Go(func() { get(client, "/", "") })
	}
	wg.Wait()

	w, n := boundaryWindow, int64(boundaryLimit)
	begin := time.Now()
	first := time.Unix(0, (begin.Add(w/2).UnixNano()/int64(w)+1)*int64(w)) // an edge at least w/2 away
	end := first.Add(time.Duration(boundaryRounds*len(cases)) * w)

	var mu sync.Mutex
	attacks := make([][][]shot, len(cases)) // [case][round]
	honest := make([][]shot, len(cases))
	other := make([]int64, len(cases))
	fire := func(i int, key string, at time.Time, out *[]shot) {
		defer wg.Done()
		time.Sleep(time.Until(at))
		sent := time.Now()
		code := get(client, cases[i].path(), key)
		done := time.Now()
		mu.Lock()
		defer mu.Unlock()
		if code != http.StatusOK && code != http.StatusTooManyRequests {
			other[i]++
		}
		*out = append(*out, shot{Sent: sent, Done: done, OK: code == http.StatusOK})
	}
	for i := range cases {
		attacks[i] = make([][]shot, boundaryRounds)
		for at := begin; at.Before(end); at = at.Add(w / time.Duration(n)) {
			wg.Add(1)
			go fire(i, "honest", at, &honest[i])
		}
		for r := range boundaryRounds {
			edge := first.Add(time.Duration(r*len(cases)+i) * w)
			for _, at := range attackTimes(edge, n, w, boundaryLead) {
				wg.Add(1)
				go fire(i, "attacker-"+strconv.Itoa(r), at, &attacks[i][r])
			}
		}
	}
	wg.Wait()

	var rows []boundaryRow
	for i, c := range cases {
		row := boundaryRow{Case: c, Limit: n, Window: w, Other: other[i]}
		leaky := c.Algorithm == string(limiter.LeakyBucket)
		row.Bound, row.Formula = boundaryBound(c, n, w, limiter.DefaultMaxDelay, leaky)
		if leaky {
			row.DecidedBound, row.DecidedFormula = boundaryBound(c, n, w, limiter.DefaultMaxDelay, false)
		}
		for _, ss := range attacks[i] {
			row.Max = append(row.Max, maxWithin(ss, w))
			if leaky {
				row.Decided = append(row.Decided, maxSent(ss, w))
			}
		}
		for _, h := range honest[i] {
			if h.Sent.Sub(begin) >= w {
				row.HonestSent++
				if h.OK {
					row.HonestAdmitted++
				}
			}
		}
		log.Printf("boundary, %s: admitted in one window %v (worst case %d), decided %v; honest %d of %d; %d other",
			c, row.Max, row.Bound, row.Decided, row.HonestAdmitted, row.HonestSent, row.Other)
		if slices.Max(row.Max) == 0 || row.HonestAdmitted == 0 {
			return nil, fmt.Errorf("%s admitted nothing", c)
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// get sends GET path with X-Client: key (none if key is ""), and returns
// the status (0 for a transport error).
func get(client *http.Client, path, key string) int {
	req, _ := http.NewRequest(http.MethodGet, "http://"+serverAddr+path, nil)
	if key != "" {
		req.Header.Set("X-Client", key)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

func boundarySection(p printer, res *results) {
	if len(res.Boundary) == 0 {
		return
	}
	r0 := res.Boundary[0]
	n, w := r0.Limit, r0.Window
	step := w / time.Duration(boundaryPace*n)
	p("### Bursts timed at a window's edge\n\n")
	p("```\ncd integration/bench && go run ./cmd/bench -only boundary\n```\n\n")
	p("One Caddy (edgelimit's binary, every core) with a route per row, each a rule of `limit %d %v` keyed by `X-Client`. ", n, w)
	p("Windows are aligned to the Unix epoch, so a client knows where their edges fall. ")
	p("The attacker, %d rounds per row, each on a fresh key and an edge of its own: a burst of N+%d requests %v before the edge, another %v after it, ", len(r0.Max), boundaryExtra, boundaryLead, boundaryAfter)
	p("then one request every %v (%d× the limit's rate) from %v after the edge until a window after the first burst; each request is sent at its time, whatever the others' answers. ", step, boundaryPace, step/2)
	p("Admitted in one window: the most 200s whose request was sent and whose response came back within one span [t, t+%v), so the server decided them all within one window's length (a lower bound of what it admitted there); ", w)
	p("`leaky_bucket` holds the requests it admits: \"served\" counts their responses, \"decided\" counts them by when they were sent (a decision follows its send by a millisecond or so: this one is not a strict bound). ")
	p("Worst case: the most the limiter's code admits in a half-open span of one window; `TestBoundaryBounds` (`integration/bench/cmd/bench`) drives this attack through package limiter in virtual time and reaches it exactly; random schedules, bursty around the edges, reach it and never pass it. ")
	p("The honest client: a key of its own on the same route, one request every W/N = %v, sent on time, for the whole stage (the attacks' %d windows); its share is admitted over sent, after its first window.\n\n", w/time.Duration(n), len(r0.Max)*len(res.Boundary))
	p("| algorithm | limit N | burst B | admitted in one window, per round | most × N | worst case | honest client's share |\n|---|---|---|---|---|---|---|\n")
	for _, r := range res.Boundary {
		burst := "—"
		if r.Case.Burst > 0 {
			burst = strconv.FormatInt(r.Case.Burst, 10)
		}
		name := r.Case.Algorithm
		if len(r.Decided) > 0 {
			name += ", served"
		}
		share := fmt.Sprintf("%.1f%% (%d of %d)", 100*float64(r.HonestAdmitted)/float64(max(r.HonestSent, 1)), r.HonestAdmitted, r.HonestSent)
		p("| %s | %d | %s | %v | **%.2f** | %d = %s | %s |\n", name, r.Limit, burst, r.Max, float64(slices.Max(r.Max))/float64(r.Limit), r.Bound, r.Formula, share)
		if len(r.Decided) > 0 {
			p("| %s, decided | %d | %s | %v | **%.2f** | %d = %s | (the same) |\n", r.Case.Algorithm, r.Limit, burst, r.Decided, float64(slices.Max(r.Decided))/float64(r.Limit), r.DecidedBound, r.DecidedFormula)
		}
	}
	var other int64
	for _, r := range res.Boundary {
		other += r.Other
	}
	p("\nResponses other than 200 or 429, and transport errors: %d. ", other)
	if d, ok := res.Took["boundary"]; ok {
		p("The stage took %v.", d)
	}
	p("\n\n")
}
