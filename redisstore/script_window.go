package redisstore

// luaFixedWindow counts units per window aligned to the Unix epoch, or
// per calendar period (win), as limiter's fixed_window. Per limit i:
// a<i> = the window's start (µs),
// b<i> = units taken in it. The key lives until the longest window ends.
// Refund: units come back if the window they were taken in (the one that
// held the decision's time) is still the key's; those of a window already
// past are gone anyway.
const luaFixedWindow = `
local function prepare() end
local function step(i, c)
  local n = N[i]
  local start, count = A[i], B[i]
  local cur, w = win(i)
  if cur < start then cur = start end -- time went backwards
  if cur ~= start then count = 0 end
  local e = cur + w - now
  if count + c > n then
    local r = e
    if c > n then r = w end
    return {ok = false, rem = max(n - count, 0), reset = e, retry = r, never = c > n}
  end
  count = count + c
  return {ok = true, a = cur, b = count, rem = n - count, reset = e}
end
local function commit(i, r)
  set('a' .. i, r.a); set('b' .. i, r.b)
  local _, w = win(i)
  return r.a + w - now
end
local function take(i, c)
  local start, count = A[i], B[i]
  local cur = win(i)
  if cur < start then cur = start end
  if cur ~= start then count = 0 end
  return {a = cur, b = count + c}
end
local function refund(i, c)
  if A[i] > 0 and A[i] == win(i, took) then set('b' .. i, max(B[i] - c, 0)) end
end
`

// luaSlidingWindow estimates the units of the last window as
// prev×(1−elapsed/W)+curr, as limiter's sliding_window, compared exactly
// (in W-ths of a unit). Per limit i: a<i> = the current window's start
// (µs), b<i> = the previous window's count, c<i> = the current one's. The
// key lives until both counts have aged out: at most two windows.
// Refund: units come back to the count they were taken in (the window
// that held the decision's time): the current one, or the previous one
// if the key has rolled over once since; none once it has left both.
const luaSlidingWindow = `
local function prepare() end
local function sreset(cur, w, prev, curr)
  if curr > 0 then return cur + 2 * w - now end
  if prev > 0 then return cur + w - now end
  return 0
end
local function sretry(cur, w, n, prev, curr, c)
  if c > n then return w end
  local room = n - c
  if curr <= room and prev > 0 then
    local e = w - idiv((room - curr) * w, prev)
    if e < w then return max(cur + e - now, 1) end
  end
  local e = 0
  if curr > room then e = w - idiv(room * w, curr) end
  return max(cur + w - now + e, 1)
end
local function step(i, c)
  local n, w = N[i], W[i]
  local start = A[i]
  local cur = align(now, w)
  if cur < start then cur = start end -- time went backwards
  local prev, curr = 0, 0
  if start >= cur then prev, curr = B[i], Cc[i]
  elseif start >= cur - w then prev = Cc[i] end
  local el = max(now - cur, 0)
  local used = prev * (w - el) + curr * w
  local lim = n * w
  local after = used + c * w
  if after > lim then
    return {ok = false, rem = idiv(max(lim - used, 0), w), reset = sreset(cur, w, prev, curr),
      retry = sretry(cur, w, n, prev, curr, c), never = c > n}
  end
  curr = curr + c
  return {ok = true, a = cur, b = prev, c = curr, rem = idiv(lim - after, w), reset = sreset(cur, w, prev, curr)}
end
local function commit(i, r)
  set('a' .. i, r.a); set('b' .. i, r.b); set('c' .. i, r.c)
  return r.a + 2 * W[i] - now
end
local function take(i, c)
  local w, start = W[i], A[i]
  local cur = align(now, w)
  if cur < start then cur = start end
  local prev, curr = 0, 0
  if start >= cur then prev, curr = B[i], Cc[i]
  elseif start >= cur - w then prev = Cc[i] end
  return {a = cur, b = prev, c = curr + c}
end
local function refund(i, c)
  local tw = align(took, W[i])
  if A[i] <= 0 then return end
  if A[i] == tw then set('c' .. i, max(Cc[i] - c, 0))
  elseif A[i] == tw + W[i] then set('b' .. i, max(B[i] - c, 0)) end
end
`
