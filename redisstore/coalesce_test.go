package redisstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/edgebyte/edgelimit/limiter"
)

// TestManyInOneCall: one call deciding n requests decides them as n calls
// one after the other would, on every algorithm: the first Count are
// admitted with the remaining units counting down (a leaky bucket's delay
// growing), and the reply ends at the first denial.
func TestManyInOneCall(t *testing.T) {
	_, c := start(t)
	for _, algo := range algorithms {
		t.Run(string(algo), func(t *testing.T) {
			cfg := config(algo, limiter.Limit{Count: 10, Window: time.Hour})
			one := newStore(t, c, cfg)
			cfg.KeyPrefix = one.prefix + "many:"
			many := newStore(t, c, cfg)
			var want []limiter.Decision
			for range 15 {
				want = append(want, allow(t, one, "k", 1))
			}
			got, err := many.allowN(t.Context(), flightKey{"k", 1, 1}, 15, false)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 11 {
				t.Fatalf("%d decisions in the reply, want 11 (10 admitted, then the denial)", len(got))
			}
			for i := range 15 {
				g, w := got[min(i, 10)], want[i]
				if g.Allowed != w.Allowed || g.Quotas[0].Remaining != w.Quotas[0].Remaining || !near(g.Delay, w.Delay) || !near(g.RetryAfter, w.RetryAfter) {
					t.Fatalf("request %d: %+v, want %+v", i, g, w)
				}
			}
			if st := many.Stats(); st.Calls != 1 || st.Coalesced != 14 {
				t.Fatalf("stats %+v, want 1 call deciding 15", st)
			}
		})
	}
}

// TestCoalescedExact: 64 goroutines sharing one Store with Coalesce make
// 5000 attempts on one key limited to 1000: exactly 1000 pass, on every
// algorithm, in fewer calls than requests.
func TestCoalescedExact(t *testing.T) {
	_, c := start(t)
	for _, algo := range algorithms {
		t.Run(string(algo), func(t *testing.T) {
			cfg := config(algo, limiter.Limit{Count: limit, Window: time.Hour})
			cfg.Coalesce = true
			s := newStore(t, c, cfg)
			hammer(t, func() *Store { return s })
			st := s.Stats()
			if st.Calls+st.Coalesced != attempts || st.Coalesced == 0 {
				t.Fatalf("stats %+v: want %d requests, some coalesced", st, attempts)
			}
			t.Logf("%d requests in %d calls", attempts, st.Calls)
		})
	}
}

// flightLog is a callN that holds each call until released, and records
// how many requests each call decided: the coalescer's logic, without
// timing.
type flightLog struct {
	started chan int
	release chan error // releases the calls of cost 1
	other   chan error // releases the calls of other costs
}

func newFlightLog() *flightLog {
	return &flightLog{started: make(chan int, 16), release: make(chan error), other: make(chan error)}
}

func (f *flightLog) call(ctx context.Context, k flightKey, n int, _ bool) ([]Decision, error) {
	f.started <- n
	release := f.release
	if k.cost != 1 {
		release = f.other
	}
	if err := <-release; err != nil {
		return nil, err
	}
	ds := make([]Decision, n)
	for i := range ds {
		ds[i] = Decision{Decision: limiter.Decision{Allowed: i < 2, Len: 1}}
		ds[i].Quotas[0].Remaining = int64(100 + i)
	}
	return ds, nil
}

// TestCoalescerFlights: the first request calls at once; the five that
// arrive during its call go in one call after it, each getting its own
// decision (here the first two of a call are admitted); a different cost
// is a different flight.
func TestCoalescerFlights(t *testing.T) {
	c, log := newCoalescer(), newFlightLog()
	k := flightKey{"k", 1, 1}
	type result struct {
		d   Decision
		err error
	}
	first := make(chan result, 1)
	go func() { d, err := c.allow(context.Background(), k, log.call); first <- result{d, err} }()
	if n := <-log.started; n != 1 {
		t.Fatalf("first call decides %d, want 1", n)
	}
	rest := make(chan result, 5)
	for range 5 {
		go func() { d, err := c.allow(context.Background(), k, log.call); rest <- result{d, err} }()
	}
	waitJoined(t, c, k, 5)
	other := make(chan result, 1)
	go func() {
		d, err := c.allow(context.Background(), flightKey{"k", 2, 1}, log.call)
		other <- result{d, err}
	}()
	if n := <-log.started; n != 1 {
		t.Fatalf("a request of another cost: call of %d, want its own", n)
	}
	log.other <- nil
	<-other
	log.release <- nil
	if r := <-first; r.err != nil || !r.d.Allowed || r.d.Quotas[0].Remaining != 100 {
		t.Fatalf("first: %+v %v", r.d, r.err)
	}
	if n := <-log.started; n != 5 {
		t.Fatalf("second call decides %d, want 5", n)
	}
	log.release <- nil
	seen := map[int64]bool{}
	admitted := 0
	for range 5 {
		r := <-rest
		if r.err != nil {
			t.Fatal(r.err)
		}
		seen[r.d.Quotas[0].Remaining] = true
		if r.d.Allowed {
			admitted++
		}
	}
	if len(seen) != 5 || admitted != 2 {
		t.Fatalf("five requests got %d distinct decisions, %d admitted; want 5 and 2", len(seen), admitted)
	}
	waitJoined(t, c, k, 0) // the last flight lands just after its requests have their answers
	sh := c.shardOf(k.key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if len(sh.flights) != 0 {
		t.Fatalf("%d flights left in the air", len(sh.flights))
	}
}

// TestCoalescerErrors: a request that leaves does not fail the others of
// its flight; a failed call fails every request it decided; a flight whose
// earliest deadline passed before the call ahead of it landed is not sent,
// and its requests get an unavailable error.
func TestCoalescerErrors(t *testing.T) {
	c, log := newCoalescer(), newFlightLog()
	k := flightKey{"k", 1, 1}
	first := make(chan error, 1)
	go func() { _, err := c.allow(context.Background(), k, log.call); first <- err }()
	<-log.started
	ctx, cancel := context.WithCancel(context.Background())
	gone := make(chan error, 1)
	go func() { _, err := c.allow(ctx, k, log.call); gone <- err }()
	waitJoined(t, c, k, 1)
	stays := make(chan error, 1)
	go func() { _, err := c.allow(context.Background(), k, log.call); stays <- err }()
	waitJoined(t, c, k, 2)
	cancel()
	if err := <-gone; !errors.Is(err, context.Canceled) {
		t.Fatalf("the request whose client left: %v, want context.Canceled", err)
	}
	log.release <- nil
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if n := <-log.started; n != 2 {
		t.Fatalf("the flight behind decides %d, want 2 (the one that left keeps its slot)", n)
	}
	boom := errors.New("boom")
	log.release <- boom
	if err := <-stays; err != boom {
		t.Fatalf("the request that stayed: %v, want the call's error", err)
	}

	// A flight that cannot make its deadline is not sent.
	go func() { _, err := c.allow(context.Background(), k, log.call); first <- err }()
	<-log.started
	short, cancelShort := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancelShort()
	late := make(chan error, 2)
	go func() { _, err := c.allow(short, k, log.call); late <- err }()
	waitJoined(t, c, k, 1)
	go func() { _, err := c.allow(context.Background(), k, log.call); late <- err }()
	waitJoined(t, c, k, 2)
	if err := <-late; !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the short request: %v, want its deadline", err)
	}
	log.release <- nil
	<-first
	if err := <-late; !errors.Is(err, ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a flight past its deadline: %v, want unavailable, deadline exceeded", err)
	}
	select {
	case n := <-log.started:
		t.Fatalf("a call of %d was sent past its deadline", n)
	default:
	}
}

// TestCoalescerWaitsOnlyIfItFits: a request whose deadline leaves less than
// the call in the air and two more (by the calls' recent duration) calls
// at once, beside it.
func TestCoalescerWaitsOnlyIfItFits(t *testing.T) {
	c, log := newCoalescer(), newFlightLog()
	c.rtt.Store(int64(40 * time.Millisecond))
	k := flightKey{"k", 1, 1}
	done := make(chan error, 2)
	go func() { _, err := c.allow(context.Background(), k, log.call); done <- err }()
	<-log.started
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	go func() { _, err := c.allow(ctx, k, log.call); done <- err }()
	if n := <-log.started; n != 1 {
		t.Fatalf("a request that cannot wait: a call of %d, want its own", n)
	}
	log.release <- nil
	log.release <- nil
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

// waitJoined waits until n requests gather behind k's flight in the air
// (n = 0: until no flight of k is in the air).
func waitJoined(t *testing.T, c *coalescer, k flightKey, n int) {
	t.Helper()
	sh := c.shardOf(k.key)
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		sh.mu.Lock()
		f := sh.flights[k]
		got := 0
		if f != nil && f.next != nil {
			got = f.next.n
		}
		sh.mu.Unlock()
		if got == n && (n > 0 || f == nil) {
			return
		}
		time.Sleep(time.Millisecond) // polling another goroutine's progress
	}
	t.Fatalf("%d requests never gathered behind %v", n, k)
}
