package main

import (
	"fmt"
	"log"
	"os"
	"time"
)

// memoryKeys is how many distinct keys the memory rows add.
const memoryKeys = 100_000

// memoryRow is the growth of a server's memory over memoryKeys new keys.
type memoryRow struct {
	Name               string
	RSSBefore, RSS     int64 // bytes, before and after the keys
	HeapBefore, Heap   int64 // live heap after a collection, before and after
	RSSPerKey, HeapPer float64
}

// memoryCase is a limiter configuration whose memory per key is measured.
type memoryCase struct {
	Name      string
	Bin       binary
	Algorithm string // edgelimit's, "" for caddy-ratelimit
	Limit     int64  // per minute; caddy-ratelimit's max_events
}

func memoryCases() []memoryCase {
	var cases []memoryCase
	for _, algo := range []string{"sliding_window", "fixed_window", "token_bucket", "leaky_bucket", "sliding_log"} {
		cases = append(cases, memoryCase{Name: "edgelimit " + algo, Bin: edgelimit, Algorithm: algo, Limit: 100})
	}
	return append(cases,
		memoryCase{Name: "caddy-ratelimit, events 100", Bin: ratelimit, Limit: 100},
		memoryCase{Name: "caddy-ratelimit, events 1000", Bin: ratelimit, Limit: 1000},
	)
}

// runMemory measures each case: a server at rest after a warm-up, then the
// same server after memoryKeys requests, each with a key of its own.
func runMemory(binDir, dir string) ([]memoryRow, error) {
	var rows []memoryRow
	for _, mc := range memoryCases() {
		row, err := measureMemory(binDir, dir, mc)
		if err != nil {
			return nil, err
		}
		log.Printf("memory, %s: RSS %+.0f B/key, heap %+.0f B/key", mc.Name, row.RSSPerKey, row.HeapPer)
		rows = append(rows, row)
	}
	return rows, nil
}

func measureMemory(binDir, dir string, mc memoryCase) (memoryRow, error) {
	row := memoryRow{Name: mc.Name}
	work, err := os.MkdirTemp(dir, "mem-")
	if err != nil {
		return row, err
	}
	defer os.RemoveAll(work)
	sc := scenario{Limit: mc.Limit, Window: time.Minute, Key: "header"}
	h := handlers(mc.Bin, sc)
	if mc.Algorithm != "" {
		h[0]["rules"].([]any)[0].(map[string]any)["algorithm"] = mc.Algorithm
	}
	s, err := start(mc.Bin.path(binDir), h, 0, work)
	if err != nil {
		return row, err
	}
	defer s.stop()
	// The same 16 connections and one known key for a second, so that
	// buffers and pools are as they are under load.
	if _, err := runWrk(dir, "", time.Second, 1); err != nil {
		return row, err
	}
	if row.HeapBefore, err = s.heap(); err != nil {
		return row, err
	}
	if row.RSSBefore, err = s.rss(); err != nil {
		return row, err
	}
	if err := touchAll(memoryKeys); err != nil {
		return row, err
	}
	if row.Heap, err = s.heap(); err != nil {
		return row, err
	}
	if row.RSS, err = s.rss(); err != nil {
		return row, err
	}
	if row.RSS == 0 {
		return row, fmt.Errorf("%s: no RSS", mc.Name)
	}
	row.RSSPerKey = float64(row.RSS-row.RSSBefore) / memoryKeys
	row.HeapPer = float64(row.Heap-row.HeapBefore) / memoryKeys
	return row, nil
}
