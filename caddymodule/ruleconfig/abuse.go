package ruleconfig

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/edgebyte/edgelimit/limiter"
	"golang.org/x/net/http/httpguts"
)

// StatusSet is a set of HTTP statuses, 100 to 599, one bit each.
type StatusSet [8]uint64

// Has reports whether code is in the set.
func (s *StatusSet) Has(code int) bool {
	i := code - 100
	return i >= 0 && i < 500 && s[i>>6]&(1<<(i&63)) != 0
}

// add puts code in the set.
func (s *StatusSet) add(code int) { i := code - 100; s[i>>6] |= 1 << (i & 63) }

// ParseStatuses reads count_status's values: codes from 100 to 599, or
// classes from 1xx to 5xx.
func ParseStatuses(values []string) (StatusSet, error) {
	var s StatusSet
	if len(values) == 0 {
		return s, fmt.Errorf("count_status: want at least one status code (401) or class (4xx)")
	}
	for _, v := range values {
		if len(v) == 3 && v[0] >= '1' && v[0] <= '5' && strings.EqualFold(v[1:], "xx") {
			base := int(v[0]-'0') * 100
			for c := base; c < base+100; c++ {
				s.add(c)
			}
			continue
		}
		c, err := strconv.Atoi(v)
		if err != nil || c < 100 || c > 599 || len(v) != 3 {
			return s, fmt.Errorf("count_status %q: want a status code from 100 to 599 or a class from 1xx to 5xx", v)
		}
		s.add(c)
	}
	return s, nil
}

// CheckBlockFor checks block_for's durations.
func CheckBlockFor(durations []caddy.Duration) error {
	for _, d := range durations {
		if d <= 0 || time.Duration(d) > limiter.MaxWindow {
			return fmt.Errorf("block_for %s: each duration must be above 0 and at most %s", time.Duration(d), limiter.MaxWindow)
		}
	}
	return nil
}

// CheckAbuse checks block_for, block_reset, count_status and cost_header,
// alone and together.
func (r *Rule) CheckAbuse() error {
	if err := CheckBlockFor(r.BlockFor); err != nil {
		return err
	}
	if r.BlockReset < 0 || time.Duration(r.BlockReset) > limiter.MaxWindow {
		return fmt.Errorf("block_reset %s: must be above 0 and at most %s", time.Duration(r.BlockReset), limiter.MaxWindow)
	}
	if r.BlockReset != 0 && len(r.BlockFor) == 0 {
		return fmt.Errorf("block_reset without block_for: there are no blocks to forget")
	}
	if r.CountStatus != nil {
		if _, err := ParseStatuses(r.CountStatus); err != nil {
			return err
		}
	}
	if r.CostHeader != "" && !httpguts.ValidHeaderFieldName(r.CostHeader) {
		return fmt.Errorf("cost_header %q: not a valid header name", r.CostHeader)
	}
	if (r.CostHeader != "" || r.CountStatus != nil) && r.Algorithm == string(limiter.LeakyBucket) {
		return fmt.Errorf("count_status and cost_header take units after the response: a leaky_bucket cannot hold a request for units it does not know yet; use token_bucket")
	}
	if r.Store == StoreRedis {
		for _, d := range append(slices.Clone(r.BlockFor), r.BlockReset) {
			if time.Duration(d)%time.Microsecond != 0 {
				return fmt.Errorf("block_for and block_reset %s: must be a whole number of microseconds with store redis", time.Duration(d))
			}
		}
	}
	return nil
}

// BlockDurations is block_for, as durations.
func (r *Rule) BlockDurations() []time.Duration {
	out := make([]time.Duration, len(r.BlockFor))
	for i, d := range r.BlockFor {
		out[i] = time.Duration(d)
	}
	return out
}
