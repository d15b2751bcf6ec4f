package admin

import (
	"context"
	"net/http"
	"time"

	"github.com/edgebyte/edgelimit/caddymodule"
)

// The admin API's side of blocks (block_for): a key's block in its
// state, DELETE lifting it, and GET /rate_limit/rules/{rule}/blocked.

// maxBlockedListed bounds GET …/blocked.
const maxBlockedListed = 100

// blockedView is GET /rate_limit/rules/{rule}/blocked.
type blockedView struct {
	Rule string `json:"rule"`
	// Keys are the keys blocked now, the latest block end first (store
	// redis: in no particular order), at most 100.
	Keys []blockedKeyView `json:"keys"`
}

// blockedKeyView is one blocked key.
type blockedKeyView struct {
	Key          string    `json:"key"`
	Escaped      bool      `json:"escaped,omitempty"`
	BlockedUntil time.Time `json:"blocked_until"`
	Offences     int       `json:"offences"`
	// RetryAfterSeconds is the rest of the block.
	RetryAfterSeconds float64 `json:"retry_after_seconds"`
}

// serveBlocked answers the keys a rule blocks now.
func serveBlocked(w http.ResponseWriter, _ *http.Request, e caddymodule.RuleState) error {
	now := time.Now()
	v := blockedView{Rule: e.Name(), Keys: []blockedKeyView{}}
	add := func(key string, until time.Time, offences int) {
		k := blockedKeyView{BlockedUntil: until.UTC(), Offences: offences, RetryAfterSeconds: until.Sub(now).Seconds()}
		k.Key, k.Escaped = jsonKey(key)
		v.Keys = append(v.Keys, k)
	}
	if st := e.Redis(); st != nil {
		ctx, cancel := context.WithTimeout(context.Background(), max(adminStoreTimeout, st.Timeout()))
		defer cancel()
		keys, err := st.Store().Blocked(ctx, maxBlockedListed)
		if err != nil {
			return apiError(http.StatusServiceUnavailable, "rule %q: reading redis: %v", e.Name(), err)
		}
		for _, k := range keys {
			add(k.Key, k.Until, int(k.Offences))
		}
		return writeJSON(w, v)
	}
	if e.Blocks() != nil && len(e.Config().BlockFor) > 0 {
		for _, k := range e.Blocks().ListAt(now, maxBlockedListed) {
			add(k.Key, k.Until, k.Offences)
		}
	}
	return writeJSON(w, v)
}

// hasBlock reports whether key has a block or remembered offences.
func hasBlock(e caddymodule.RuleState, key string) bool {
	if e.Blocks() == nil {
		return false
	}
	_, ok := e.Blocks().InfoAt(key, time.Now())
	return ok
}

// withBlock adds key's block to v: while it runs, the key is refused.
func withBlock(v *keyView, e caddymodule.RuleState, key string, now time.Time) {
	if e.Blocks() == nil {
		return
	}
	if b, ok := e.Blocks().InfoAt(key, now); ok {
		setBlock(v, b.Until, b.Offences, now)
	}
}

// withStoreBlock adds key's block in Redis to v.
func withStoreBlock(ctx context.Context, v *keyView, st *caddymodule.RedisState, key string) error {
	b, err := st.Store().BlockOf(ctx, key)
	if err != nil {
		return err
	}
	setBlock(v, b.Until, int(b.Offences), time.Now())
	return nil
}

func setBlock(v *keyView, until time.Time, offences int, now time.Time) {
	v.Offences = offences
	if until.After(now) {
		u := until.UTC()
		v.BlockedUntil = &u
		v.Allowed = false
		v.RetryAfterSeconds = max(v.RetryAfterSeconds, until.Sub(now).Seconds())
	}
}
