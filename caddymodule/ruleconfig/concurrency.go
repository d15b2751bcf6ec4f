package ruleconfig

import (
	"fmt"
	"math"
	"time"

	"github.com/edgebyte/edgelimit/limiter"
)

// ConcurrentOnlyLimits is the limiter configuration of a rule with
// max_concurrent and no limit: its registry entry needs a limiter, which
// never decides a request (see ConcurrentOnly).
var ConcurrentOnlyLimits = []limiter.Limit{{Count: 1, Window: limiter.MinWindow}}

// ConcurrentOnly is true for a rule with max_concurrent and no limit: no
// rate is decided, only the requests in flight.
func (r *Rule) ConcurrentOnly() bool { return len(r.Limits) == 0 && r.MaxConcurrent > 0 }

// CheckConcurrent checks max_concurrent and what it cannot be combined
// with.
func (r *Rule) CheckConcurrent() error {
	switch {
	case r.MaxConcurrent == 0:
		return r.checkLeaseTimeout()
	case r.MaxConcurrent < 0 || r.MaxConcurrent > math.MaxUint32:
		return fmt.Errorf("max_concurrent %d: must be a whole number from 1 to %d", r.MaxConcurrent, uint32(math.MaxUint32))
	}
	if err := r.checkLeaseTimeout(); err != nil {
		return err
	}
	if !r.ConcurrentOnly() {
		return nil
	}
	for what, set := range map[string]bool{
		"algorithm": r.Algorithm != "", "burst": r.Burst != 0, "max_delay": r.MaxDelay != 0,
		"max_held": r.MaxHeld != 0, "cost": r.Cost != "", "tier": len(r.Tiers) > 0,
		"count_status": len(r.CountStatus) > 0, "cost_header": r.CostHeader != "", "block_for": len(r.BlockFor) > 0,
	} {
		if set {
			return fmt.Errorf("%s needs a limit line: a rule with max_concurrent alone counts requests in flight, one each", what)
		}
	}
	return nil
}

// checkLeaseTimeout checks lease_timeout: with max_concurrent and store
// redis, whole milliseconds, at least 3ms.
func (r *Rule) checkLeaseTimeout() error {
	t := time.Duration(r.LeaseTimeout)
	switch {
	case t == 0:
		return nil
	case r.MaxConcurrent == 0 || r.Store != StoreRedis:
		return fmt.Errorf("lease_timeout applies to max_concurrent with store redis only")
	case t < 3*time.Millisecond || t%time.Millisecond != 0:
		return fmt.Errorf("lease_timeout %s: must be whole milliseconds, at least 3ms", t)
	}
	return nil
}
