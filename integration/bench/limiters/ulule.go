package limiters

import (
	"context"
	"time"

	ulule "github.com/ulule/limiter/v3"
	"github.com/ulule/limiter/v3/drivers/store/memory"
)

// ululeLimiter is ulule/limiter's in-memory store (memory.NewStore: a
// sync.Map of "limiter:"+key → counter, swept every 30s by a goroutine):
// a fixed window per key that starts at the key's first request. Its API
// takes no time: the store reads time.Now, and the time passed to Allow
// is ignored. Get counts denied requests too.
type ululeLimiter struct{ l *ulule.Limiter }

func newUlule(limit int64, window time.Duration, _ int) Store {
	return ululeLimiter{ulule.New(memory.NewStore(), ulule.Rate{Period: window, Limit: limit})}
}

func (s ululeLimiter) Allow(key string, _ time.Time) bool {
	c, err := s.l.Get(context.Background(), key)
	return err == nil && !c.Reached
}
