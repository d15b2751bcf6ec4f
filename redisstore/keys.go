package redisstore

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
)

// maxTagKey is the longest user key kept readable in Redis key names;
// longer ones are replaced by their SHA-256, so a key costs Redis at most
// a bounded name.
const maxTagKey = 200

// Escape encodes a user key for use between '{' and '}': the bytes '%',
// '{' and '}' become %25, %7B and %7D, so the tag ends at the brace the
// Store puts there and every key of one user key lands in one Redis Cluster
// slot. The empty key is "%-" (a tag must not be empty, or Redis would hash
// the whole name); a key longer than maxTagKey bytes is "%H" and its
// SHA-256 in hex. Neither form can come out of the escaping, so distinct
// keys get distinct names. Callers use it too for names they put in a
// KeyPrefix (which must hold no brace).
func Escape(key string) string {
	switch {
	case key == "":
		return "%-"
	case len(key) > maxTagKey:
		sum := sha256.Sum256([]byte(key))
		return "%H" + hex.EncodeToString(sum[:])
	case !strings.ContainsAny(key, "%{}"):
		return key
	}
	var b strings.Builder
	b.Grow(len(key) + 8)
	for i := 0; i < len(key); i++ {
		switch c := key[i]; c {
		case '%':
			b.WriteString("%25")
		case '{':
			b.WriteString("%7B")
		case '}':
			b.WriteString("%7D")
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// redisKey is the Redis key of key's hash, "<prefix>{<tag>}".
func (s *Store) redisKey(key string) string { return s.prefix + "{" + Escape(key) + "}" }

// RedisKeys returns the Redis keys that hold key's state, in the order the
// script takes them: the hash, then (sliding_log) one ZSET per limit,
// "<prefix>{<tag>}" and "<prefix>{<tag>}:log:<i>", then, with blocks
// (Config.BlockFor), the block's hash "<prefix>{<tag>}:block". All share
// the hash tag, hence one Cluster slot.
func (s *Store) RedisKeys(key string) []string {
	base := s.redisKey(key)
	if s.logs == 0 && !s.blocks {
		return []string{base}
	}
	keys := make([]string, 1, 2+s.logs)
	keys[0] = base
	for i := range s.logs {
		keys = append(keys, base+":log:"+strconv.Itoa(i+1))
	}
	if s.blocks {
		keys = append(keys, base+blockSuffix)
	}
	return keys
}
