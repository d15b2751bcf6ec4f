package redisstore

// luaSlidingLog keeps the admissions of the last window, as limiter's
// sliding_log. Per limit i, KEYS[1+i] is a ZSET of events: score = the
// time (µs), member = "<seq>:<units>" (seq from the hash's field s, so
// members are unique; one event per admission or charge, whatever its
// cost). b<i> in the hash is the units the ZSET holds, so a decision reads
// the expired events only, never the whole log. Each event holds at least
// one unit and admissions never take the units held past the limit: a
// ZSET has at most Count members, and one more per charge taken while
// the limit was reached (requests in flight, see charge.go).
// Expired events are removed when a request is admitted; a denial writes
// nothing. Every key lives for the longest window after the newest event.
// Refund: the oldest units at or after the decision's time come back (the
// reservation's own, or an earlier admission's stamped later if time went
// backwards; never a later admission's), if that time is still in the
// window; an emptied event leaves, but the newest keeps its time with no
// units, as limiter's.
const luaSlidingLog = `
local NEW, HELD, OLD = {}, {}, {}
local seq = tonumber(redis.call('HGET', H, 's')) or 0
local function units(m) return tonumber(string.match(m, ':(%d+)$')) or 0 end
local function prepare()
  for i = 1, L do
    local z = KEYS[1 + i]
    local top = redis.call('ZRANGE', z, -1, -1, 'WITHSCORES')
    local newest = tonumber(top[2])
    local held = B[i]
    if not newest then
      held = 0 -- the log expired: whatever the hash says, nothing is held
    else
      local old = redis.call('ZRANGEBYSCORE', z, '-inf', max(now, newest) - W[i])
      for k = 1, #old do held = held - units(old[k]) end
      OLD[i] = #old > 0
    end
    NEW[i] = newest
    HELD[i] = max(held, 0)
  end
end
local function lretry(i, held, c)
  local n, w, z = N[i], W[i], KEYS[1 + i]
  if c > n then return w end
  local from = max(now, NEW[i] or 0) - w
  local off = 0
  while true do
    local ev = redis.call('ZRANGEBYSCORE', z, '(' .. string.format('%d', from), '+inf', 'WITHSCORES', 'LIMIT', off, 128)
    if #ev == 0 then return w end
    for k = 1, #ev, 2 do
      held = held - units(ev[k])
      if held + c <= n then return max(tonumber(ev[k + 1]) + w - now, 1) end
    end
    off = off + #ev / 2
  end
end
local function step(i, c)
  local n, w, held, newest = N[i], W[i], HELD[i], NEW[i]
  local live = held > 0 and newest ~= nil
  if held + c > n then
    local reset = 0
    if live then reset = newest + w - now end
    return {ok = false, rem = max(n - held, 0), reset = reset, retry = lretry(i, held, c), never = c > n}
  end
  local reset = 0
  if c > 0 then reset = max(now, newest or 0) + w - now
  elseif live then reset = newest + w - now end
  return {ok = true, rem = n - held - c, reset = reset}
end
local function commit(i, r)
  local z, t = KEYS[1 + i], max(now, NEW[i] or 0)
  if OLD[i] then redis.call('ZREMRANGEBYSCORE', z, '-inf', t - W[i]) end
  seq = seq + 1
  redis.call('ZADD', z, t, string.format('%d', seq) .. ':' .. string.format('%d', cost))
  set('b' .. i, HELD[i] + cost)
  if i == L then set('s', seq) end
  return t + longest - now
end
local function take(i, c) return {} end -- commit adds the event of cost units
local function refund(i, c)
  local z = KEYS[1 + i]
  if not NEW[i] or took <= max(now, NEW[i]) - W[i] then return end -- expired
  local given, off = 0, 0
  while c > 0 do
    local ev = redis.call('ZRANGEBYSCORE', z, string.format('%d', took), '+inf', 'WITHSCORES', 'LIMIT', off, 64)
    if #ev == 0 then break end
    for k = 1, #ev, 2 do
      local u = units(ev[k])
      local g = min(c, u)
      if g > 0 then
        redis.call('ZREM', z, ev[k])
        if u > g then
          seq = seq + 1
          redis.call('ZADD', z, ev[k + 1], string.format('%d', seq) .. ':' .. string.format('%d', u - g))
        else
          off = off - 1 -- a member less before the next batch
        end
        c, given = c - g, given + g
        if c == 0 then break end
      end
    end
    off = off + #ev / 2
  end
  if given == 0 then return end
  local top = redis.call('ZRANGE', z, -1, -1, 'WITHSCORES')
  if not top[2] or tonumber(top[2]) < NEW[i] then
    seq = seq + 1 -- the newest keeps its time, with no units
    redis.call('ZADD', z, string.format('%d', NEW[i]), string.format('%d', seq) .. ':0')
  end
  set('b' .. i, max(B[i] - given, 0)); set('s', seq)
end
`
