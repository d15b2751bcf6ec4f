package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/edgebyte/edgelimit/limiter"
)

// TestCluster: on a Redis Cluster of three masters, every algorithm counts
// down exactly and is all-or-nothing across its limits, and all the Redis
// keys of one user key share one slot (so the script may touch them all).
func TestCluster(t *testing.T) {
	c := startCluster(t)
	ctx := context.Background()
	for _, algo := range algorithms {
		t.Run(string(algo), func(t *testing.T) {
			limits := []limiter.Limit{{Count: 10, Window: time.Hour}, {Count: 3, Window: 24 * time.Hour}}
			if algo == limiter.LeakyBucket {
				limits = limits[:1]
			}
			s := newStore(t, c, config(algo, limits...))
			for _, key := range []string{"a", "b", "c", "d", "e", "f", "{x}", "}{"} {
				keys := s.RedisKeys(key)
				slot, err := c.ClusterKeySlot(ctx, keys[0]).Result()
				if err != nil {
					t.Fatal(err)
				}
				for _, k := range keys[1:] {
					if other, _ := c.ClusterKeySlot(ctx, k).Result(); other != slot {
						t.Fatalf("%q in slot %d, %q in %d", keys[0], slot, k, other)
					}
				}
				want := limits[len(limits)-1].Count
				for i := range want {
					if d := allow(t, s, key, 1); !d.Allowed || d.Quotas[len(limits)-1].Remaining != want-1-i {
						t.Fatalf("key %q request %d: %+v", key, i+1, d)
					}
				}
				d := allow(t, s, key, 1)
				if d.Allowed {
					t.Fatalf("key %q: allowed past the limit", key)
				}
				if len(limits) > 1 && d.Quotas[0].Remaining != 7 {
					t.Fatalf("key %q: the denied request took from the first limit: %+v", key, d.Quotas[0])
				}
			}
		})
	}
}
