package main

import (
	"bufio"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// scrape reads metric's samples from the Prometheus text at an admin
// endpoint's /metrics, summed by the value of label ("" sums them all
// under ""). A metric with no sample is an error: a count of 0 is
// exported too, so none means no figure.
func scrape(admin, metric, label string) (map[string]int64, error) {
	resp, err := http.Get("http://" + admin + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s/metrics: %s", admin, resp.Status)
	}
	sums := map[string]int64{}
	seen := false
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		by, v, ok, err := sample(sc.Text(), metric, label)
		if err != nil {
			return nil, err
		}
		if ok {
			sums[by] += v
			seen = true
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if !seen {
		return nil, fmt.Errorf("%s/metrics: no %s", admin, metric)
	}
	return sums, nil
}

// sample reads one line of Prometheus's text format: ok if it is a
// sample of metric (with labels or without), with its label's value (or
// "" when label is "") and its value.
func sample(line, metric, label string) (by string, v int64, ok bool, err error) {
	if !strings.HasPrefix(line, metric+"{") && !strings.HasPrefix(line, metric+" ") {
		return "", 0, false, nil
	}
	if label != "" {
		_, rest, _ := strings.Cut(line, label+`="`)
		by, _, _ = strings.Cut(rest, `"`)
	}
	f, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
	if err != nil {
		return "", 0, false, fmt.Errorf("metrics line %q: %w", line, err)
	}
	return by, int64(f), true, nil
}
