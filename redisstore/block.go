package redisstore

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/edgebyte/edgelimit/limiter"
	"github.com/redis/go-redis/v9"
)

// A key's block (Config.BlockFor) lives in the hash "<prefix>{<tag>}:block",
// beside the key's counters (same hash tag, same Cluster slot), and is read
// and started by the decision's script itself: u is when the block ends
// (µs, Redis time), n the offences (blocks) remembered, e when they are
// forgotten (u + BlockReset). The hash's TTL is the block's duration plus
// BlockReset, so a key that behaves disappears; the script compares u and
// e with its clock, so a block ends on time whatever Redis's expiry does.
// One hash rather than a block key and an offences key: one HMGET per
// decision, one HSET and PEXPIRE per block started.
const blockSuffix = ":block"

// Decision is limiter's decision and, with Config.BlockFor, the key's
// block.
type Decision struct {
	limiter.Decision
	// Block is the key's block after the decision: zero without blocks.
	Block Block
	// At is Redis's clock at the decision (µs): what Refund needs to give
	// an allowed decision's units back where they were taken.
	At time.Time
}

// Block is a key's abuse block as Redis holds it.
type Block struct {
	// Until is when the block in force ends (Redis's clock); zero: the
	// key is not blocked.
	Until time.Time
	// Offences is the blocks of the key remembered (within BlockReset of
	// the end of the last one), the one in force included: the next block
	// lasts BlockFor[min(Offences+1, len)-1].
	Offences int64
	// Started is true only in the decision whose denial started the
	// block: the caller logs it and counts it once (a coalesced request
	// or an over-limit cache hit that shares the denial has it false).
	Started bool
}

// Blocked is whether a block is in force (Until is set).
func (b Block) Blocked() bool { return !b.Until.IsZero() }

// luaClockArg1 sets now, in µs, from ARGV[1], the clock a test gives,
// or Redis's TIME when it is 0: the preamble of the scripts whose first
// argument is the clock.
const luaClockArg1 = `
local now = tonumber(ARGV[1])
if now <= 0 then
  local tm = redis.call('TIME')
  now = tonumber(tm[1]) * 1000000 + tonumber(tm[2])
end
`

// luaBlockRead reads a block on the script's clock: KEYS[1] the block's
// hash, ARGV[1] the clock (0: TIME). Reply: {now, until (0: none in
// force), offences (0: forgotten)}.
const luaBlockRead = luaClockArg1 + `
local v = redis.call('HMGET', KEYS[1], 'u', 'n', 'e')
local u, n = tonumber(v[1]) or 0, 0
if u <= now then u = 0 end
if (tonumber(v[3]) or 0) > now then n = tonumber(v[2]) or 0 end
return {now, u, n}
`

var blockRead = redis.NewScript(luaBlockRead)

// BlockOf reads key's block (admin's GET of a key): Until zero if none is
// in force, Offences the blocks remembered. Without Config.BlockFor it is
// zero, without a call. Reset lifts a block.
func (s *Store) BlockOf(ctx context.Context, key string) (Block, error) {
	if !s.blocks {
		return Block{}, nil
	}
	return s.readBlock(ctx, s.blockKey(key))
}

// readBlock reads the block hash rk.
func (s *Store) readBlock(ctx context.Context, rk string) (Block, error) {
	if s.breaker != nil && !s.breaker.Allow() {
		return Block{}, fmt.Errorf("redisstore: %w (breaker open)", ErrUnavailable)
	}
	res, err := blockRead.Run(ctx, s.client, []string{rk}, s.clockArg()).Int64Slice()
	if err := s.done(err); err != nil {
		return Block{}, err
	}
	if len(res) != 3 {
		return Block{}, fmt.Errorf("redisstore: unexpected reply %v", res)
	}
	var b Block
	if res[1] > 0 {
		b.Until = time.UnixMicro(res[1])
	}
	b.Offences = res[2]
	return b, nil
}

// BlockedKey is one key of Store.Blocked.
type BlockedKey struct {
	// Key is the user key; a key longer than 200 bytes is known only by
	// its Escape form ("%H" and its SHA-256), and is given so.
	Key string
	Block
}

// maxScanRounds bounds the SCAN calls of one Blocked per Redis node.
const maxScanRounds = 1000

// Blocked lists up to limit keys of the rule whose block is in force
// (admin's GET …/blocked), in no particular order. It SCANs the rule's
// block hashes (MATCH "<prefix>{*}:block", on every master of a Cluster),
// at most maxScanRounds calls of 1,000 keys per node, and reads each
// hash found on the script's clock (a hash whose block ended but whose
// offences are remembered is passed over). Its cost grows with the keys Redis holds,
// not with the blocked ones: an admin call, never on a request's path.
// A block index per rule (a sorted set) was not chosen: it lives in
// another Cluster slot than the key, so the decision's script could not
// keep it (CROSSSLOT), and a second call per block would cost a round
// trip on the request that starts it, and drift when it fails.
func (s *Store) Blocked(ctx context.Context, limit int) ([]BlockedKey, error) {
	if !s.blocks || limit <= 0 {
		return nil, nil
	}
	if s.breaker != nil && !s.breaker.Allow() {
		return nil, fmt.Errorf("redisstore: %w (breaker open)", ErrUnavailable)
	}
	var mu sync.Mutex
	var out []BlockedKey
	pattern := globEscape(s.prefix) + "{*}" + blockSuffix
	scan := func(ctx context.Context, c redis.Cmdable) error {
		var cursor uint64
		for range maxScanRounds {
			ks, next, err := c.Scan(ctx, cursor, pattern, 1000).Result()
			if err != nil {
				return err
			}
			for _, k := range ks {
				tag, _ := strings.CutPrefix(k, s.prefix+"{")
				tag, ok := strings.CutSuffix(tag, "}"+blockSuffix)
				if !ok {
					continue
				}
				b, err := s.readBlock(ctx, k)
				if err != nil {
					return err
				}
				mu.Lock()
				if b.Blocked() && len(out) < limit {
					out = append(out, BlockedKey{Key: unescape(tag), Block: b})
				}
				full := len(out) >= limit
				mu.Unlock()
				if full {
					return nil
				}
			}
			if cursor = next; cursor == 0 {
				return nil
			}
		}
		return nil
	}
	var err error
	if cc, ok := s.client.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return scan(ctx, c) })
	} else {
		err = scan(ctx, s.client)
	}
	if err := s.done(err); err != nil {
		return out, err
	}
	return out, nil
}

// blockKey is the name of key's block hash.
func (s *Store) blockKey(key string) string {
	return s.prefix + "{" + Escape(key) + "}" + blockSuffix
}

// clockArg is the scripts' clock argument: 0 (Redis's TIME) unless a test
// set the Store's clock.
func (s *Store) clockArg() int64 {
	if s.clock == nil {
		return 0
	}
	return s.clock().UnixMicro()
}

// globEscape escapes the glob characters of SCAN's MATCH in s.
func globEscape(s string) string {
	if !strings.ContainsAny(s, `*?[]\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if strings.IndexByte(`*?[]\`, s[i]) >= 0 {
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// unescape is Escape's inverse, for the tags Blocked finds: "%-" is the
// empty key, and a hashed key ("%H…") stays as it is.
func unescape(tag string) string {
	switch {
	case tag == "%-":
		return ""
	case strings.HasPrefix(tag, "%H"), !strings.Contains(tag, "%"):
		return tag
	}
	return strings.NewReplacer("%25", "%", "%7B", "{", "%7D", "}").Replace(tag)
}
