package redisstore

import (
	"strconv"
	"strings"

	"github.com/edgebyte/edgelimit/limiter"
)

// The allow script: the decision of one request ("a", one request) for a
// window algorithm without the features that need the whole script (a
// burst bucket, blocks, calendar limits), which is what a rule of the
// default algorithm asks on every request. It runs the algorithm's own
// step and commit functions (luaSlidingWindow, luaFixedWindow: one
// implementation of each) between a prelude and a driver that do only
// what that case needs: no argument it ignores is parsed, no function it
// never calls is made (Redis builds a script's closures on every run),
// its hash's fields are named in the source. Its arguments, writes and
// reply are the whole script's for the same call, to the byte
// (TestAllowScriptSameAsWhole); it costs Redis about two thirds as much
// (docs/redis.md).

// luaAllowPrelude is luaPrelude for the allow script: ARGV as the whole
// script's, with no blocks and no calendar limits (the limits from
// ARGV[11] on). %FIELDS% is the hash's fields, a<i>, b<i>, c<i> per
// limit.
const luaAllowPrelude = `
if redis.replicate_commands then pcall(redis.replicate_commands) end
local floor, max, min = math.floor, math.max, math.min
local cost = tonumber(ARGV[2])
local now = tonumber(ARGV[5])
if now <= 0 then
  local tm = redis.call('TIME')
  now = tonumber(tm[1]) * 1000000 + tonumber(tm[2])
end
local L = (#ARGV - 10) / 3
local H = KEYS[1]
local v = redis.call('HMGET', H, %FIELDS%)
local N, W, A, B, Cc = {}, {}, {}, {}, {}
local longest = 0
for i = 1, L do
  N[i] = tonumber(ARGV[8 + 3 * i])
  W[i] = tonumber(ARGV[9 + 3 * i])
  if W[i] > longest then longest = W[i] end
  A[i] = tonumber(v[3 * i - 2]) or 0
  B[i] = tonumber(v[3 * i - 1]) or 0
  Cc[i] = tonumber(v[3 * i]) or 0
end
` + luaArith + `
local function win(i, t) return align(t or now, W[i]), W[i] end
local took
`

// luaAllowDriver is luaDriver's "a" for one request, without burst and
// blocks: every limit stepped, all taken or none, the TTL.
const luaAllowDriver = luaStepLimits + `
if never then retry = longest end
if not allowed and cost > 0 then
  for i = 1, L do if res[i].ok then res[i] = step(i, 0) end end
end
if cost == 0 then allowed, retry = true, 0 end
if allowed and cost > 0 then
  local keep = 1
  for i = 1, L do keep = max(keep, commit(i, res[i])) end
  redis.call('HSET', H, unpack(put))
  redis.call('PEXPIRE', H, max(cdiv(keep, 1000), minttl))
end
local out = {allowed and 1 or 0, retry, 0, now}
for i = 1, L do out[#out + 1] = res[i].rem; out[#out + 1] = res[i].reset end
return out
`

// allowScript is the allow script's source for c, or "" when c needs the
// whole script for every call (another algorithm, a burst, blocks,
// calendar limits).
func (c Config) allowScript() string {
	var algo string
	switch c.algorithm() {
	case limiter.SlidingWindow:
		algo = luaSlidingWindow
	case limiter.FixedWindow:
		algo = luaFixedWindow
	default:
		return ""
	}
	if c.Burst > 0 || len(c.BlockFor) > 0 || newPeriods(c) != nil {
		return ""
	}
	fields := make([]string, 0, 3*len(c.Limits))
	for i := range c.Limits {
		n := strconv.Itoa(i + 1)
		fields = append(fields, "'a"+n+"'", "'b"+n+"'", "'c"+n+"'")
	}
	prelude := strings.Replace(luaAllowPrelude, "%FIELDS%", strings.Join(fields, ", "), 1)
	return prelude + algo + luaAllowDriver
}
