package redisstore

// The scripts are built from three parts: luaPrelude (arguments, server
// time, integer helpers, GCRA), one algorithm's part (its state, step,
// commit and refund functions), and luaDriver (every limit checked, then
// all taken or none, then the TTL). Each algorithm's script is thus one
// EVALSHA, atomic on the server.
//
// Numbers: Redis Lua has only doubles, exact for integers below 2^53. Time
// is in microseconds (Unix time ≈ 1.8e15 µs), so products such as
// count×window(µs) stay exact up to 2^53 ≈ 9e15: e.g. 2.5 million per hour
// or 100,000 per day. Larger products are compared to within a relative
// 1e-16. Values are written back with string.format('%d'), never through
// Lua's 14-digit tostring.
//
// KEYS[1] is the key's hash; the sliding log adds one ZSET per limit;
// with blocks (block_for), the last key is the block's hash (see
// block.go). ARGV: 1 op ("a" allow, "p" peek: decide but take nothing,
// "k" check: a peek that starts a block when it denies, "t" take: charge
// the units whatever the limits, "r" refund), 2 cost, 3 requests (the
// number of requests of that cost decided one after the other: coalesced
// requests of one key; for "r", the time of the decision that took the
// units, µs: the refund lands where they were taken), 4 scaled ("1" when the counts are a scale of the
// rule's: a token bucket fuller than full is then read as full, as
// limiter's), 5 clock (µs; 0: Redis's TIME, tests only set it), 6 burst
// capacity in front of a window algorithm (0: none), 7 leaky bucket max
// delay (µs), 8 block reset (µs), 9 the number of block durations nb,
// then nb durations (µs), then the number of calendar limits np and, per
// calendar limit, its index and four instants (µs) around the caller's
// clock: the previous period's start, the current one's start and end,
// the next one's end; then per limit: count, window (µs), capacity
// (token bucket) or queue depth (leaky bucket).
//
// The reply to "a", "p" and "k" is one decision per request, {allowed,
// retry_after_us, delay_us, now_us, remaining_1, reset_us_1, remaining_2,
// reset_us_2, …} each (with blocks, followed by blocked_until_us (0: not
// blocked), offences, started (1: this request started the block)), one
// after the other, ending at the first denial (the requests after it
// would get the same: nothing changed); to "r" and "t", 1.

// luaPrelude parses the arguments and reads the server's clock. TIME is
// non-deterministic: Redis ≥ 5 replicates a script's effects (its writes),
// not the script, so replicas and the AOF get the same state; on Redis
// 3.2–4 redis.replicate_commands() asks for the same, and is a no-op
// later.
const luaPrelude = `
if redis.replicate_commands then pcall(redis.replicate_commands) end
local floor, max, min = math.floor, math.max, math.min
local op = ARGV[1]
local cost = tonumber(ARGV[2])
local reps = tonumber(ARGV[3])
local took = reps -- op 'r': the refunded decision's time (µs)
local scaled = ARGV[4] == '1'
local now = tonumber(ARGV[5])
if now <= 0 then
  local tm = redis.call('TIME')
  now = tonumber(tm[1]) * 1000000 + tonumber(tm[2])
end
local burst = tonumber(ARGV[6])
local maxdelay = tonumber(ARGV[7])
local breset = tonumber(ARGV[8])
local nb = tonumber(ARGV[9])
local BD = {}
for j = 1, nb do BD[j] = tonumber(ARGV[9 + j]) end
local np = tonumber(ARGV[10 + nb])
local P = {}
for j = 1, np do
  local o = 10 + nb + 5 * (j - 1)
  P[tonumber(ARGV[o + 1])] = {tonumber(ARGV[o + 2]), tonumber(ARGV[o + 3]), tonumber(ARGV[o + 4]), tonumber(ARGV[o + 5])}
end
local base = 10 + nb + 5 * np
local L = (#ARGV - base) / 3
local N, W, C = {}, {}, {}
local longest, bi = 0, 1
for i = 1, L do
  N[i] = tonumber(ARGV[base + 3 * i - 2])
  W[i] = tonumber(ARGV[base + 3 * i - 1])
  C[i] = tonumber(ARGV[base + 3 * i])
  if W[i] > longest then longest = W[i] end
  if W[i] < W[bi] then bi = i end
end
local H = KEYS[1]
-- BK is the block's hash (nil: no blocks); NC the keys of the counters
local BK, NC = nil, #KEYS
if nb > 0 then BK, NC = KEYS[#KEYS], #KEYS - 1 end
` + luaArith + `-- win is the start and length of limit i's fixed window at t (default
-- now): the epoch-aligned window of its length, or a calendar limit's
-- period (the caller's periods around its clock, whichever holds t; a t
-- before the earliest of them is in no window: -1).
local function win(i, t)
  t = t or now
  local p = P[i]
  if not p then return align(t, W[i]), W[i] end
  if t < p[1] then return -1, W[i] end
  if t < p[2] then return p[1], p[2] - p[1] end
  if t >= p[3] then return p[3], p[4] - p[3] end
  return p[2], p[3] - p[2]
end

-- State of every limit: fields a<i>, b<i>, c<i>; the burst bucket ba, bb.
-- load reads it (again, after a coalesced request was admitted).
local A, B, Cc = {}, {}, {}
local BA, BB = 0, 0
local function load()
  put = {}
  local f = {}
  for i = 1, L do f[#f + 1] = 'a' .. i; f[#f + 1] = 'b' .. i; f[#f + 1] = 'c' .. i end
  f[#f + 1] = 'ba'; f[#f + 1] = 'bb'
  local v = redis.call('HMGET', H, unpack(f))
  for i = 1, L do
    A[i] = tonumber(v[3 * i - 2]) or 0
    B[i] = tonumber(v[3 * i - 1]) or 0
    Cc[i] = tonumber(v[3 * i]) or 0
  end
  BA = tonumber(v[3 * L + 1]) or 0
  BB = tonumber(v[3 * L + 2]) or 0
end
load()

-- GCRA: a bucket's state is its theoretical arrival time (TAT): t whole
-- µs and f, the fraction of the next µs in n-ths, so that a unit costs
-- exactly w/n µs. backlog is how far the TAT is ahead of now, in n-ths of a
-- µs.
local function backlog(t, f, n)
  if t < now then return 0 end
  return (t - now) * n + min(f, n - 1)
end
local function tat_after(x, n)
  local q = idiv(x, n)
  local r = x - q * n
  local wait = q
  if r ~= 0 then wait = q + 1 end
  return now + q, r, wait
end
-- gcra admits cost units if the TAT after them is at most cap units
-- (cap×w n-ths of a µs) ahead of now. Scaled, a TAT further ahead is read
-- as a full bucket (see at_most_full).
local function gcra(t, f, n, w, cap, c)
  local tau = cap * w
  local x = backlog(t, f, n)
  if scaled and x > tau then x = tau end
  local rem = idiv(max(tau - x, 0), w)
  if c > cap then
    return {ok = false, rem = rem, reset = cdiv(x, n), retry = w, never = true}
  end
  local nx = x + c * w
  if nx > tau then
    return {ok = false, rem = rem, reset = cdiv(x, n), retry = cdiv(nx - tau, n)}
  end
  local a, b, full = tat_after(nx, n)
  return {ok = true, a = a, b = b, rem = idiv(tau - nx, w), reset = full, keep = full}
end
-- at_most_full is a TAT moved back to a full bucket's (cap units ahead of
-- now), or nil if it is no further ahead. Scaled requests apply it first
-- to the token buckets (limiter's atMostFull): a TAT further ahead was
-- left by a smaller scale, where a unit costs longer, and is no debt.
local function at_most_full(t, f, n, w, cap)
  if backlog(t, f, n) <= cap * w then return nil end
  local a, b = tat_after(cap * w, n)
  return a, b
end
-- tat_limits is true when the limits are token buckets (the algorithm sets it).
local tat_limits = false
-- gcra_refund moves a TAT back by what c units took at took, less the
-- refill since, never before now (limiter's refundBucket).
local function gcra_refund(t, f, n, w, c)
  local x = backlog(t, f, n)
  local give = c * w
  if now > took then give = give - (now - took) * n end
  if x == 0 or give <= 0 then return nil end
  local a, b = tat_after(max(x - give, 0), n)
  return a, b
end
`

// luaArith is the scripts' writes and integer helpers: minttl is the
// shortest TTL a key is given, put collects the hash's fields to write,
// set adds one in integer digits; idiv, cdiv and align divide integers
// exactly (floor, ceiling, a window's start). It needs floor (math.floor)
// in scope.
const luaArith = `
local minttl = 1000 -- ms: a key lives at least this long (doc.go's Memory)
local put = {}
local function set(f, v) put[#put + 1] = f; put[#put + 1] = string.format('%d', v) end

-- idiv is floor(a/b) for integers a >= 0, b > 0, corrected for rounding.
local function idiv(a, b)
  local q = floor(a / b)
  local r = a - q * b
  if r < 0 then return q - 1 elseif r >= b then return q + 1 end
  return q
end
local function cdiv(a, b)
  local q = idiv(a, b)
  if q * b < a then return q + 1 end
  return q
end
local function align(t, w) return idiv(t, w) * w end
`

// luaStepLimits steps every limit by cost (the algorithm's step): res
// holds each result; allowed is whether all had room, retry the longest
// wait of those that had not, never whether one can never admit cost.
// refused(r) counts a step without room (a limit's, or the burst
// bucket's) into allowed, retry and never.
const luaStepLimits = `
local res = {}
local allowed, retry, never = true, 0, false
local function refused(r)
  allowed = false
  if r.retry > retry then retry = r.retry end
  never = never or r.never
end
for i = 1, L do
  local r = step(i, cost)
  res[i] = r
  if not r.ok then refused(r) end
end
`

// luaDriver decides with the algorithm's step, prepare, commit, take and
// refund functions, and the burst bucket (window algorithms) in front:
// once per request, reading the state again after each admission. A key
// whose block is in force is denied before any limit is looked at; a
// denial (of "a" or "k") starts the next block. "t" charges: take(i, c)
// is limit i's state after c more units, whatever its limit.
const luaDriver = `
-- clamp makes a scaled request's token buckets at most full (limiter's
-- atMostFull), before it is decided or charged
local function clamp()
  for i = 1, L do
    local a, b
    if tat_limits then a, b = at_most_full(A[i], B[i], N[i], W[i], C[i]) end
    if a then A[i], B[i] = a, b; set('a' .. i, a); set('b' .. i, b) end
  end
  if burst > 0 then
    local a, b = at_most_full(BA, BB, N[bi], W[bi], burst)
    if a then BA, BB = a, b; set('ba', a); set('bb', b) end
  end
end
-- expire keeps the keys keep µs, at least minttl ms
local function expire(keep)
  local ms = max(cdiv(keep, 1000), minttl)
  for k = 1, NC do redis.call('PEXPIRE', KEYS[k], ms) end
end
if op == 'r' then
  prepare()
  if cost > 0 then
    for i = 1, L do refund(i, cost) end
    if burst > 0 then
      local a, b = gcra_refund(BA, BB, N[bi], W[bi], cost)
      if a then set('ba', a); set('bb', b) end
    end
    if #put > 0 then redis.call('HSET', H, unpack(put)) end
  end
  return 1
end
if op == 't' then
  -- charge: every limit (and the burst bucket) takes cost units, past
  -- its limit if need be; blocks do not apply
  prepare()
  if cost > 0 then
    if scaled then clamp() end
    local keep = 1
    for i = 1, L do keep = max(keep, commit(i, take(i, cost))) end
    if burst > 0 then
      local a, b, full = tat_after(backlog(BA, BB, N[bi]) + cost * W[bi], N[bi])
      set('ba', a); set('bb', b)
      keep = max(keep, full)
    end
    redis.call('HSET', H, unpack(put))
    expire(keep)
  end
  return 1
end
-- the block: until (µs), offences remembered
local BU, BN = 0, 0
if BK then
  local v = redis.call('HMGET', BK, 'u', 'n', 'e')
  BU = tonumber(v[1]) or 0
  if (tonumber(v[3]) or 0) > now then BN = tonumber(v[2]) or 0 end
end
local function blockout(out, started)
  if not BK then return out end
  local u = 0
  if BU > now then u = BU end
  out[#out + 1] = u; out[#out + 1] = BN; out[#out + 1] = started
  return out
end
local function once()
prepare()
if BU > now then
  -- blocked: denied for the block's rest, nothing taken or started
  local rest = BU - now
  local out = {0, rest, 0, now}
  for i = 1, L do
    local r = step(i, 0)
    out[#out + 1] = 0; out[#out + 1] = max(r.reset, rest)
  end
  return blockout(out, 0), false
end
if scaled and op == 'a' and cost > 0 then clamp() end
` + luaStepLimits + `local br
if burst > 0 then
  br = gcra(BA, BB, N[bi], W[bi], burst, cost)
  if not br.ok then refused(br) end
end
if never then retry = longest end
if not allowed and cost > 0 then
  -- nothing is taken: the limits that had room report it untaken
  for i = 1, L do if res[i].ok then res[i] = step(i, 0) end end
  if br and br.ok then br = gcra(BA, BB, N[bi], W[bi], burst, 0) end
end
if br and br.rem < res[bi].rem then res[bi].rem = br.rem end
if cost == 0 then allowed, retry = true, 0 end
local started = 0
if BK and not allowed and op ~= 'p' then
  -- the rule denied: a block at the next level of escalation
  BN = BN + 1
  local d = BD[min(BN, nb)]
  BU = now + d
  redis.call('HSET', BK, 'u', string.format('%d', BU), 'n', string.format('%d', BN), 'e', string.format('%d', BU + breset))
  redis.call('PEXPIRE', BK, cdiv(d + breset, 1000))
  started = 1
  retry = max(retry, d)
end
local delay = 0
if allowed and cost > 0 then delay = res[1].delay or 0 end
if allowed and cost > 0 and op == 'a' then
  local keep = 1
  for i = 1, L do keep = max(keep, commit(i, res[i])) end
  if br then
    set('ba', br.a); set('bb', br.b)
    keep = max(keep, br.keep)
  end
  redis.call('HSET', H, unpack(put))
  expire(keep)
elseif #put > 0 then
  redis.call('HSET', H, unpack(put)) -- buckets made at most full: the key is there
end
local out = {allowed and 1 or 0, retry, delay, now}
for i = 1, L do out[#out + 1] = res[i].rem; out[#out + 1] = res[i].reset end
return blockout(out, started), allowed
end
local all = {}
for k = 1, reps do
  if k > 1 then load() end
  local out, allowed = once()
  for j = 1, #out do all[#all + 1] = out[j] end
  if not allowed or op ~= 'a' then break end
end
return all
`
