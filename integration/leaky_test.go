package integration

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// leakyCaddyfile paces requests at 10 per second (one per 100 ms). With
// burst 5, at most 5 requests wait behind the one being served, so the
// longest hold is 500 ms; with max_delay 200ms and no burst, 200 ms.
const leakyCaddyfile = trustLoopback + `
:{{.HTTP}} {
	rate_limit /leaky {
		name leaky
		limit 10 1s
		algorithm leaky_bucket
		burst 5
	}
	rate_limit /short {
		name short
		limit 10 1s
		algorithm leaky_bucket
		max_delay 200ms
	}
	respond "ok"
}
`

// burst fires n requests for path from client at once, on connections
// opened beforehand, and returns the tally of statuses and the slowest
// 200's time from the common start.
func burst(t *testing.T, p *caddyProc, n int, path, client string) (map[int]int, time.Duration) {
	t.Helper()
	// Open n keep-alive connections with requests no rule limits, so that
	// the burst is not spread out by dialing.
	concurrently(n, func(int) int {
		code, _, _ := p.rawGet(context.Background(), "/free")
		return code
	})
	var headers []string
	if client != "" {
		headers = xff(client)
	}
	errs := make([]error, n)
	codes, took := concurrently(n, func(i int) int {
		code, _, err := p.rawGet(context.Background(), path, headers...)
		errs[i] = err
		return code
	})
	tally := make(map[int]int)
	var slowest time.Duration
	for i, code := range codes {
		if errs[i] != nil {
			t.Errorf("%s request %d: %v", path, i, errs[i])
		}
		tally[code]++
		if code == 200 {
			slowest = max(slowest, took[i])
		}
	}
	return tally, slowest
}

// TestLeakyBucketDelays checks that requests within the queue are held,
// not rejected: four at once are served 0, 100, 200 and 300 ms later.
func TestLeakyBucketDelays(t *testing.T) {
	t.Parallel()
	p := startCaddy(t, leakyCaddyfile)
	tally, slowest := burst(t, p, 4, "/leaky", "192.0.2.1")
	if fmt.Sprint(tally) != fmt.Sprint(map[int]int{200: 4}) {
		t.Errorf("4 at once: statuses %v, want all 200", tally)
	}
	if slowest < 250*time.Millisecond {
		t.Errorf("4 at once: the last was served after %v, want ≥ 300ms (held in the queue)", slowest)
	}
	if slowest > 3*time.Second {
		t.Errorf("4 at once: the last was served after %v, want about 300ms", slowest)
	}
}

// TestLeakyBucketRejects checks the bound on the queue: of 20 requests at
// once, the first is served at once and 5 wait 100 to 500 ms; the 7th
// would wait 600 ms, more than the queue holds, and so would the rest.
// With max_delay 200ms instead of a burst, 3 pass (waits 0, 100, 200 ms).
func TestLeakyBucketRejects(t *testing.T) {
	t.Parallel()
	p := startCaddy(t, leakyCaddyfile)
	for i, tc := range []struct {
		path    string
		allowed int
		slowest time.Duration
	}{
		{"/leaky", 6, 500 * time.Millisecond},
		{"/short", 3, 200 * time.Millisecond},
	} {
		tally, slowest := burst(t, p, 20, tc.path, "192.0.2.2")
		want := map[int]int{200: tc.allowed, 429: 20 - tc.allowed}
		if fmt.Sprint(tally) != fmt.Sprint(want) {
			t.Errorf("Test %d: %s, 20 at once: statuses %v, want %v", i, tc.path, tally, want)
		}
		if slowest < tc.slowest-50*time.Millisecond {
			t.Errorf("Test %d: %s: the last was served after %v, want ≥ %v", i, tc.path, slowest, tc.slowest)
		}
	}
}

// TestLeakyBucketRetryAfter checks the Retry-After of a request the queue
// turns away: whole seconds, at least 1.
func TestLeakyBucketRetryAfter(t *testing.T) {
	t.Parallel()
	p := startCaddy(t, trustLoopback+`
:{{.HTTP}} {
	rate_limit {
		name slow
		limit 1 1m
		algorithm leaky_bucket
	}
	respond "ok"
}
`)
	if code := p.status(t, "/"); code != 200 {
		t.Fatalf("first request: status %d, want 200", code)
	}
	code, h, _ := p.get(t, "/")
	if code != 429 {
		t.Fatalf("second request: status %d, want 429", code)
	}
	// The queue is empty again a minute after the first request; the
	// second could wait up to max_delay (1s) of that.
	if got := h.Get("Retry-After"); got != "59" {
		t.Errorf("second request: Retry-After %q, want 59", got)
	}
}

// TestLeakyBucketClientGone checks that a request held in the queue gives
// its place back when its client goes away. At 2 per second (one every
// 500 ms, max_delay 1s), the first request is served at once and the
// second is held 500 ms; its client leaves after 100 ms. With its place
// given back once, the queue is 500 ms ahead, so of 4 requests at once 2
// fit (held ~400 and ~900 ms); had it kept its place, 1; given back
// twice, 3. The same must hold when the config has a second rate_limit
// handler (which makes handlers record their takings in the request).
func TestLeakyBucketClientGone(t *testing.T) {
	const leaky = `
	rate_limit /leaky {
		name leaky
		limit 2 1s
		algorithm leaky_bucket
	}
`
	for _, tc := range []struct{ name, caddyfile string }{
		{"one rate_limit handler", trustLoopback + `
:{{.HTTP}} {
	log
` + leaky + `
	respond "ok"
}
`},
		{"two rate_limit handlers", trustLoopback + `
:{{.HTTP}} {
	log
` + leaky + `
	rate_limit /elsewhere {
		name elsewhere
		limit 100 1m
	}
	respond "ok"
}
`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := startCaddy(t, tc.caddyfile)
			client := xff("192.0.2.1")
			concurrently(4, func(int) int { // open connections for the burst below
				code, _, _ := p.rawGet(context.Background(), "/free")
				return code
			})
			if code := p.status(t, "/leaky", client...); code != 200 {
				t.Fatalf("first request: status %d, want 200", code)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() {
				_, _, err := p.rawGet(ctx, "/leaky", client...)
				done <- err
			}()
			time.Sleep(100 * time.Millisecond) // the behaviour under test: leaving while held
			cancel()
			if err := <-done; err == nil {
				t.Fatal("second request: served, want it held for 500 ms and cancelled after 100 ms")
			}
			if p.waitLog(`"status":499`) == "" {
				t.Fatal("no access log line with status 499 for the cancelled request")
			}
			codes, _ := concurrently(4, func(int) int {
				code, _, err := p.rawGet(context.Background(), "/leaky", client...)
				if err != nil {
					return 0
				}
				return code
			})
			tally := make(map[int]int)
			for _, c := range codes {
				tally[c]++
			}
			if want := map[int]int{200: 2, 429: 2}; fmt.Sprint(tally) != fmt.Sprint(want) {
				t.Errorf("4 at once after the cancelled request: %v, want %v", tally, want)
			}
		})
	}
}
