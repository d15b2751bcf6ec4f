package integration

import (
	"context"
	"fmt"
	"testing"
)

// TestAlgorithmsExactCounts sends 8 requests from one client to a rule of
// 5 requests per 30 days (a window long enough that none of its edges
// falls within the test; fixed windows are epoch-aligned) under each
// algorithm, then 8 from a second client, which has its own quota.
func TestAlgorithmsExactCounts(t *testing.T) {
	t.Parallel()
	p := startCaddy(t, trustLoopback+`
:{{.HTTP}} {
	rate_limit /sliding_window {
		name sw
		limit 5 30d
		algorithm sliding_window
	}
	rate_limit /fixed_window {
		name fw
		limit 5 30d
		algorithm fixed_window
	}
	rate_limit /sliding_log {
		name sl
		limit 5 30d
		algorithm sliding_log
	}
	rate_limit /token_bucket {
		name tb
		limit 5 30d
		algorithm token_bucket
	}
	rate_limit /leaky_bucket {
		name lb
		limit 5 30d
		algorithm leaky_bucket
	}
	respond "ok"
}
`)
	for i, tc := range []struct {
		path    string
		allowed int
	}{
		{"/sliding_window", 5},
		{"/fixed_window", 5},
		{"/sliding_log", 5},
		{"/token_bucket", 5},
		// A leaky bucket spaces requests 30d/5 = 6d apart; the second
		// would wait far longer than max_delay (1s), so only one passes.
		{"/leaky_bucket", 1},
	} {
		for _, client := range []string{"192.0.2.1", "192.0.2.2"} {
			got := p.statuses(t, 8, tc.path, xff(client)...)
			wantStatuses(t, fmt.Sprintf("Test %d: %s from %s", i, tc.path, client), got, seq(tc.allowed, 200, 8-tc.allowed, 429))
		}
	}
}

// TestBurst checks that burst lets exactly B requests through back to
// back: a token bucket's capacity, or the bucket in front of a window.
func TestBurst(t *testing.T) {
	t.Parallel()
	p := startCaddy(t, trustLoopback+`
:{{.HTTP}} {
	rate_limit /token_bucket {
		name tb
		limit 5 30d
		algorithm token_bucket
		burst 2
	}
	rate_limit /token_bucket_big {
		name tb_big
		limit 5 30d
		algorithm token_bucket
		burst 7
	}
	rate_limit /sliding_window {
		name sw
		limit 100 30d
		burst 2
	}
	rate_limit /fixed_window {
		name fw
		limit 100 30d
		algorithm fixed_window
		burst 2
	}
	rate_limit /sliding_log {
		name sl
		limit 100 30d
		algorithm sliding_log
		burst 2
	}
	respond "ok"
}
`)
	for i, tc := range []struct {
		path    string
		allowed int
	}{
		{"/token_bucket", 2},
		{"/token_bucket_big", 7}, // the capacity may exceed the limit
		{"/sliding_window", 2},
		{"/fixed_window", 2},
		{"/sliding_log", 2},
	} {
		for _, client := range []string{"192.0.2.1", "192.0.2.2"} {
			got := p.statuses(t, 9, tc.path, xff(client)...)
			wantStatuses(t, fmt.Sprintf("Test %d: %s from %s", i, tc.path, client), got, seq(tc.allowed, 200, 9-tc.allowed, 429))
		}
	}
}

// TestAlgorithmsConcurrentExact sends 40 requests at once from one client
// to a limit of 10: exactly 10 pass, under every algorithm that does not
// queue.
func TestAlgorithmsConcurrentExact(t *testing.T) {
	t.Parallel()
	p := startCaddy(t, plainGlobals+`
:{{.HTTP}} {
	rate_limit /sliding_window {
		name sw
		limit 10 30d
	}
	rate_limit /fixed_window {
		name fw
		limit 10 30d
		algorithm fixed_window
	}
	rate_limit /sliding_log {
		name sl
		limit 10 30d
		algorithm sliding_log
	}
	rate_limit /token_bucket {
		name tb
		limit 10 30d
		algorithm token_bucket
	}
	respond "ok"
}
`)
	for i, path := range []string{"/sliding_window", "/fixed_window", "/sliding_log", "/token_bucket"} {
		codes, _ := concurrently(40, func(int) int {
			code, _, err := p.rawGet(context.Background(), path)
			if err != nil {
				return 0
			}
			return code
		})
		tally := make(map[int]int)
		for _, c := range codes {
			tally[c]++
		}
		if want := map[int]int{200: 10, 429: 30}; fmt.Sprint(tally) != fmt.Sprint(want) {
			t.Errorf("Test %d: %s, 40 at once: %v, want %v", i, path, tally, want)
		}
	}
}
