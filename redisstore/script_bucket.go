package redisstore

// luaTATState is what the two GCRA algorithms share: per limit i, a<i> and
// b<i> hold the TAT (whole µs, and the fraction of the next µs in n-ths);
// a step's result is written back as it is, and a refund moves the TAT
// back by what the units cost, never before now.
const luaTATState = `
local function commit(i, r)
  set('a' .. i, r.a); set('b' .. i, r.b)
  return r.keep
end
local function take(i, c)
  local a, b, full = tat_after(backlog(A[i], B[i], N[i]) + c * W[i], N[i])
  return {a = a, b = b, keep = full}
end
local function refund(i, c)
  local a, b = gcra_refund(A[i], B[i], N[i], W[i], c)
  if a then set('a' .. i, a); set('b' .. i, b) end
end
`

// luaTokenBucket is GCRA, as limiter's token_bucket, on luaTATState: the
// capacity is the limit's count, or Burst for the shortest limit. The key
// lives until the furthest TAT, when every bucket is full again.
const luaTokenBucket = luaTATState + `
tat_limits = true
local function prepare() end
local function step(i, c) return gcra(A[i], B[i], N[i], W[i], C[i], c) end
`

// luaLeakyBucket is nginx's limit_req without nodelay on a GCRA TAT, as
// limiter's leaky_bucket, on luaTATState: a1, b1 hold the time the queue
// is empty again. A request waits its turn (the reply's delay) unless that
// wait would exceed the max delay, or more than the queue depth (C, 0: no
// bound but the delay) are ahead.
const luaLeakyBucket = luaTATState + `
local function prepare() end
local function qroom(w, lim, x)
  if x > lim then return 0 end
  return idiv(lim - x, w) + 1
end
local function step(i, c)
  local n, w = N[i], W[i]
  local x = backlog(A[i], B[i], n)
  local lim = maxdelay * n
  if C[i] > 0 then lim = min(lim, C[i] * w) end
  if c > n then
    return {ok = false, rem = qroom(w, lim, x), reset = cdiv(x, n), retry = w, never = true}
  end
  if x > lim then
    return {ok = false, rem = qroom(w, lim, x), reset = cdiv(x, n), retry = cdiv(x - lim, n)}
  end
  local nx = x + c * w
  local a, b, empty = tat_after(nx, n)
  return {ok = true, a = a, b = b, rem = qroom(w, lim, nx), reset = empty, keep = empty, delay = cdiv(x, n)}
end
`
