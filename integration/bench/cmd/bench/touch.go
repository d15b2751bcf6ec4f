package main

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// scriptKeys is how many keys keys.lua and mostly-known.lua cycle over.
const scriptKeys = 200_000

// send sends total requests over conns keep-alive connections, request i
// on connection c made by newRequest(c, i), and reports each response's
// status to status (0 for a transport error); status must be safe for
// concurrent use. With pace > 0, request i leaves no sooner than
// pace·i/total after the start: the requests are spread evenly over pace.
// It returns the time from the start to the last response.
func send(conns int, total int64, pace time.Duration, newRequest func(c int, i int64) *http.Request, status func(code int)) time.Duration {
	var next atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	var begin time.Time
	for c := range conns {
		wg.Go(func() {
			client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1, MaxIdleConnsPerHost: 1}}
			defer client.CloseIdleConnections()
			<-start
			for i := next.Add(1) - 1; i < total; i = next.Add(1) - 1 {
				if pace > 0 {
					time.Sleep(time.Until(begin.Add(time.Duration(int64(pace) * i / total))))
				}
				resp, err := client.Do(newRequest(c, i))
				if err != nil {
					status(0)
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				status(resp.StatusCode)
			}
		})
	}
	begin = time.Now()
	close(start)
	wg.Wait()
	return time.Since(begin)
}

// touchAll sends one request for each of the keys "k0" … "k<n-1>" (the
// first n keys of keys.lua and mostly-known.lua), over loadConns
// connections.
func touchAll(n int64) error { return touchAllAt(serverURL, n) }

// touchAllAt is touchAll on the server at url.
func touchAllAt(url string, n int64) error {
	var failed atomic.Int64
	send(loadConns, n, 0, func(_ int, i int64) *http.Request {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		req.Header.Set("X-Client", "k"+strconv.FormatInt(i, 10))
		return req
	}, func(code int) {
		if code == 0 || code >= 500 {
			failed.Add(1)
		}
	})
	if failed := failed.Load(); failed > 0 {
		return fmt.Errorf("touching %d keys: %d requests failed", n, failed)
	}
	return nil
}
