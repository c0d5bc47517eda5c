--[[
windows.lua is what reserve.lua and lone.lua share of a calendar window
item ("w": cost, rate, B0 .. B4 from ARGV[a]): Go puts it between
prelude.lua and each of them (redisstore.go), so that the two decisions
read the starts, find the window of a time, move a round's time past a
full window and clean a key the same way, written once.
]]

-- windowStarts returns the five window starts of the window item whose
-- arguments start at ARGV[a] (b, 0-based), the window j holding now and
-- the horizon hz: the windows a decision can charge are j .. hz - 1, the
-- window of now and the two after it, capped at B4. When the server's now
-- is outside the windows the client computed, it returns nil and an error
-- reply.
local function windowStarts(a)
  local b = {}
  for w = 0, 4 do b[w] = tonumber(ARGV[a + 3 + w]) end
  for w = 0, 3 do
    if b[w] <= now and now < b[w + 1] then return b, w, math.min(w + 3, 4) end
  end
  return nil, redis.error_reply('ERR throttle: server time ' .. string.format('%d', now) ..
    ' is outside the windows the client computed: client clock off by more than a window')
end

-- slot returns the window of window item x (its starts bs, the window j
-- holding now and its horizon hz, as windowStarts gave them) that holds
-- t, or nil past its horizon.
local function slot(x, t)
  local b = x.bs
  for k = x.j, x.hz - 1 do
    if t < b[k + 1] then return k end
  end
  return nil
end

-- windowFrom is one round's step of a plain window item x (slot's x, with
-- its counts cnt, cost and rate) at time t: the earliest time from t its
-- cost fits, the start of the next window while the window of t is full,
-- and whether that is at or past its horizon (the decision cannot be made).
local function windowFrom(x, t)
  local k = slot(x, t)
  if k == nil then return t, true end
  if x.cnt[k] + x.cost > x.rate then
    local e = x.bs[k + 1]
    return e, e >= x.bs[x.hz]
  end
  return t, false
end

-- cleanWindows does what the first charge of a window of key k asks, b
-- and j as windowStarts gave them, at the index of B0 in ARGV, last the
-- end of the window charged: drop the windows that have ended and expire
-- the key at the end of the latest window it still counts. A field that
-- is none of the five starts (the calendar changed) ends at an unknown
-- time: then the key's TTL is only ever lengthened.
local function cleanWindows(k, b, j, at, last)
  local latest, unknown, stale = last, false, {}
  local h = redis.call('HGETALL', k)
  for f = 1, #h, 2 do
    local s = tonumber(h[f])
    if s == nil or s < b[j] then
      stale[#stale + 1] = h[f]
    else
      local known = false
      for kk = j, 3 do
        if h[f] == ARGV[at + kk] then
          known = true
          if b[kk + 1] > latest then latest = b[kk + 1] end
          break
        end
      end
      if not known then unknown = true end
    end
  end
  if #stale > 0 then redis.call('HDEL', k, unpack(stale)) end
  local px = ttl(latest - now)
  if unknown then
    local cur = redis.call('PTTL', k)
    if cur > px then px = cur end
  end
  redis.call('PEXPIRE', k, px)
end
