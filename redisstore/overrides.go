package redisstore

import (
	"context"
	"fmt"

	"github.com/edgebyte/edgelimit/limiter"
	"github.com/redis/go-redis/v9"
)

// A rule's per-key overrides (limiter.Overrides) live in one hash,
// "<prefix>{%O}" (a tag no user key escapes to), a field a key: its
// version (the time it was set, Unix ns, 20 decimal digits, so that
// versions compare as strings) then its encoding (limiter.AppendOverrides
// of the one entry). A removal is written as a tombstone, so that an
// older setting written later loses to it. Every node reads the hash
// whole every sync interval into its own Overrides (the request path
// never calls Redis for them), and forgets what has ended (Prune).

// overridesTag names the overrides' hash after the prefix.
const overridesTag = "{%O}"

// versionDigits is the width of a field's version.
const versionDigits = 20

// overridePut writes ARGV[2] (a version, then the entry) to field ARGV[1]
// unless the field holds a version as late or later.
var overridePut = redis.NewScript(`
local old = redis.call('HGET', KEYS[1], ARGV[1])
if old and string.sub(old, 1, 20) >= string.sub(ARGV[2], 1, 20) then
  return 0
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return 1
`)

// overridePrune deletes each field ARGV[2i-1] whose version is still
// ARGV[2i], and returns how many it deleted.
var overridePrune = redis.NewScript(`
local n = 0
for i = 1, #ARGV, 2 do
  local old = redis.call('HGET', KEYS[1], ARGV[i])
  if old and string.sub(old, 1, 20) == ARGV[i+1] then
    redis.call('HDEL', KEYS[1], ARGV[i])
    n = n + 1
  end
end
return n
`)

// overridesKey is the hash of the rule's overrides.
func (s *Store) overridesKey() string { return s.prefix + overridesTag }

// version is o's version as a field holds it.
func version(o limiter.Override) string {
	return fmt.Sprintf("%0*d", versionDigits, o.SetAt.UnixNano())
}

// PutOverride writes a change of a key's override (a setting, or a
// removal: o.Removed), unless Redis holds a later change of the key. It
// reports whether it was written.
func (s *Store) PutOverride(ctx context.Context, o limiter.Override) (bool, error) {
	v := version(o) + string(limiter.AppendOverrides(nil, []limiter.Override{o}, o.SetAt))
	n, err := overridePut.Run(ctx, s.client, []string{s.overridesKey()}, o.Key, v).Int64()
	return n == 1, err
}

// Overrides reads every change of the rule's overrides that Redis holds,
// removals too. A field that does not decode is skipped and counted in
// bad (a writer of another version, a hand edit).
func (s *Store) Overrides(ctx context.Context) (es []limiter.Override, bad int, err error) {
	m, err := s.client.HGetAll(ctx, s.overridesKey()).Result()
	if err != nil {
		return nil, 0, err
	}
	for field, v := range m {
		if len(v) < versionDigits {
			bad++
			continue
		}
		got, err := limiter.ReadOverrides([]byte(v[versionDigits:]))
		if err != nil || len(got) != 1 || got[0].Key != field || version(got[0]) != v[:versionDigits] {
			bad++
			continue
		}
		es = append(es, got[0])
	}
	return es, bad, nil
}

// PruneOverrides deletes the changes es (read by Overrides: settings that
// have expired, removals past limiter.OverrideTombstone) whose version is
// still the one Redis holds, and returns how many it deleted.
func (s *Store) PruneOverrides(ctx context.Context, es []limiter.Override) (int, error) {
	if len(es) == 0 {
		return 0, nil
	}
	args := make([]any, 0, 2*len(es))
	for _, e := range es {
		args = append(args, e.Key, version(e))
	}
	n, err := overridePrune.Run(ctx, s.client, []string{s.overridesKey()}, args...).Int64()
	return int(n), err
}
