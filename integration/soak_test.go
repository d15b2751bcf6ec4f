package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// soakCaddyfile limits each X-Key to 100 requests a second and sweeps idle
// keys every second.
const soakCaddyfile = `{
	{{.Global}}
	rate_limit {
		sweep_interval 1s
	}
}
:{{.HTTP}} {
	rate_limit /api/* {
		name soak
		limit 100 1s
		by header X-Key
		max_keys 50000
	}
	respond "ok"
}
`

// heapInuse is the Caddy process's heap in use, from its expvar memstats.
func (p *caddyProc) heapInuse(t *testing.T) uint64 {
	t.Helper()
	code, body := p.admin(t, http.MethodGet, "/debug/vars", "")
	var v struct {
		Memstats struct {
			HeapInuse uint64 `json:"HeapInuse"`
		} `json:"memstats"`
	}
	if err := json.Unmarshal([]byte(body), &v); code != 200 || err != nil {
		t.Fatalf("/debug/vars: %d %v", code, err)
	}
	return v.Memstats.HeapInuse
}

// slope is the least-squares slope of ys over their index, per index.
func slope(ys []float64) float64 {
	n := float64(len(ys))
	var sx, sy, sxx, sxy float64
	for i, y := range ys {
		x := float64(i)
		sx, sy, sxx, sxy = sx+x, sy+y, sxx+x*x, sxy+x*y
	}
	return (n*sxy - sx*sy) / (n*sxx - sx*sx)
}

// TestSoak: a steady load with churning keys (500 new keys a second, each
// asking 4 times) and one key over its limit, for EDGELIMIT_SOAK_SECONDS
// (20 by default; BENCHMARKS.md has a 10-minute run): the key over its
// limit gets its 100 a second, no more, no less, every second; the heap
// and the goroutines stay flat.
func TestSoak(t *testing.T) {
	seconds := envInt(t, "EDGELIMIT_SOAK_SECONDS", 20)
	p := startCaddy(t, soakCaddyfile)
	var hot, asked [3600 * 24]atomic.Int64 // the hot key's requests admitted and sent, by second
	var failed atomic.Int64
	start := time.Now()
	ctx, stop := context.WithTimeout(context.Background(), time.Duration(seconds)*time.Second)
	defer stop()
	var wg sync.WaitGroup
	// the churn: 2,000 requests a second over 500 keys that change each second
	work := make(chan string, 2000)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for key := range work {
				if code, _, err := p.rawGet(context.Background(), "/api/x", "X-Key", key); err != nil || code != http.StatusOK {
					failed.Add(1)
				}
			}
		}()
	}
	// the hot key: 200 requests a second, twice its limit
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for ctx.Err() == nil {
			<-tick.C
			sec := int(time.Since(start) / time.Second)
			asked[sec].Add(1)
			code, _, err := p.rawGet(context.Background(), "/api/x", "X-Key", "hot")
			switch {
			case err != nil:
				failed.Add(1)
			case code == http.StatusOK:
				hot[sec].Add(1)
			case code != http.StatusTooManyRequests:
				failed.Add(1)
			}
		}
	}()
	var heap, routines []float64
	tick := time.NewTicker(10 * time.Millisecond)
	for step := 0; ctx.Err() == nil; step++ {
		<-tick.C
		sec := int(time.Since(start) / time.Second)
		for i := range 20 { // 20 every 10 ms
			select {
			case work <- fmt.Sprintf("k-%d-%d", sec, (step*20+i)%500):
			default:
			}
		}
		if step%100 == 99 {
			heap = append(heap, float64(p.heapInuse(t))/(1<<20))
			routines = append(routines, float64(p.goroutines(t)))
		}
	}
	tick.Stop()
	close(work)
	wg.Wait()
	if failed.Load() != 0 {
		t.Errorf("%d requests failed", failed.Load())
	}
	var perSecond []int64
	// whole seconds, past the first two: the key's first window, begun
	// mid-window, fills in half a second, and the next lets it decay
	for s := 2; s < seconds-1; s++ {
		perSecond = append(perSecond, hot[s].Load())
	}
	half := len(heap) / 2
	t.Logf("hot key admitted per second %v; heap %.1f→%.1f MB (slope %.3f MB/min over the second half); goroutines %v→%v (slope %.2f/min)",
		perSecond, heap[0], heap[len(heap)-1], slope(heap[half:])*60, routines[0], routines[len(routines)-1], slope(routines[half:])*60)
	for i, n := range perSecond {
		// 100, or what was asked if the load fell behind (a busy machine)
		if want := min(100, asked[i+2].Load()); n < want-5 || n > 105 {
			t.Errorf("second %d: the hot key got %d of %d asked, want %d (±5)", i+2, n, asked[i+2].Load(), want)
		}
	}
	if heap[len(heap)-1] > heap[half]+16 {
		t.Errorf("heap grew from %.1f MB to %.1f MB in the second half", heap[half], heap[len(heap)-1])
	}
	if routines[len(routines)-1] > routines[half]+10 {
		t.Errorf("goroutines grew from %v to %v in the second half", routines[half], routines[len(routines)-1])
	}
}
