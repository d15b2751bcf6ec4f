package main

import (
	"fmt"
	"log"
	"net/http"
	"os"
	"sync/atomic"
	"time"
)

// Exactness under concurrency: exactConns connections send exactRequests
// requests in all for one key whose limit is exactLimit an hour.
const (
	exactConns    = 64
	exactRequests = 5000
	exactLimit    = 1000
	exactRounds   = 3
)

// exactRow is, per round, how many requests a binary admitted: in one
// process, or (Processes > 0) in a fleet sharing the limit (exact_fleet.go).
type exactRow struct {
	Bin      binary
	Admitted []int64
	Other    int64 // responses neither 200 nor 429, and transport errors

	// The fleet rows only.
	Processes int             `json:",omitempty"` // Caddy processes sharing the limit
	Sharing   string          `json:",omitempty"` // how they share it (Markdown)
	Pace      time.Duration   `json:",omitempty"` // the requests were spread over Pace; 0: as fast as they go
	Denied    []int64         `json:",omitempty"` // 429s, per round
	Fallbacks []int64         `json:",omitempty"` // edgelimit: requests Redis did not decide, per round
	Took      []time.Duration `json:",omitempty"` // from the first request to the last response, per round
}

// runExact runs the exactness check for both limiters, in one process and
// then in fleets (runFleet). The servers are not pinned and keep every
// core: concurrent decisions are the point.
func runExact(binDir, dir string) ([]exactRow, error) {
	var rows []exactRow
	for _, bin := range []binary{edgelimit, ratelimit} {
		row := exactRow{Bin: bin}
		for range exactRounds {
			admitted, other, err := exactOnce(binDir, dir, bin)
			if err != nil {
				return nil, err
			}
			row.Admitted = append(row.Admitted, admitted)
			row.Other += other
		}
		log.Printf("exactness, %s: admitted %v of %d (limit %d), %d other", bin, row.Admitted, exactRequests, exactLimit, row.Other)
		rows = append(rows, row)
	}
	fleet, err := runFleet(binDir, dir)
	if err != nil {
		return nil, err
	}
	return append(rows, fleet...), nil
}

func exactOnce(binDir, dir string, bin binary) (admitted, other int64, err error) {
	work, err := os.MkdirTemp(dir, "exact-")
	if err != nil {
		return 0, 0, err
	}
	defer os.RemoveAll(work)
	sc := scenario{Limit: exactLimit, Window: time.Hour, Key: "ip"}
	s, err := start(bin.path(binDir), handlers(bin, sc), -1, work)
	if err != nil {
		return 0, 0, err
	}
	defer s.stop()
	// start's readiness probe was one request of the key: count it.
	admitted = 1
	var ok, bad atomic.Int64
	send(exactConns, exactRequests-1, 0, func(int, int64) *http.Request {
		req, _ := http.NewRequest(http.MethodGet, serverURL, nil)
		return req
	}, func(code int) {
		switch code {
		case http.StatusOK:
			ok.Add(1)
		case http.StatusTooManyRequests:
		default:
			bad.Add(1)
		}
	})
	if ok.Load() == 0 {
		return 0, 0, fmt.Errorf("%s admitted nothing", bin)
	}
	return admitted + ok.Load(), bad.Load(), nil
}
