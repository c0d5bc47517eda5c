--[[
after.lua does, in one step, what happens to an admitted reservation after
its decision, item by item, each item with its own operation. Numbers,
clock and TTLs are as in reserve.lua.

Operations:

  release  give a lease back (a concurrency limit's key, a sorted set of
           lease id -> expiry: see reserve.lua, "Leases"): ZREM. Releasing
           a lease that expired or was released already does nothing.
  renew    extend a lease still held to its TTL from now, never shortening
           it, and the key's expiry with it. A lease that has expired is not
           taken again: its place may be another request's by now.
  settle   book a reservation's actual cost in one limit, as package
           quota's doc, "Settle", says: delta = actual - charged. GCRA:
           an excess (delta > 0) moves the tat by delta*T from
           max(tat, now), a debt the next requests wait for; a refund
           (delta < 0) comes back only while the stored tat is still the
           mark this reservation set (no later reservation was placed on
           it, whatever set their slots; see cancel.lua), to mark +
           delta*T, the key deleted when that is idle. Window: the count
           of the window charged moves by delta while that window is open,
           never below zero and, for an excess, past the rate if need be.

KEYS  the items' keys, one per item below
ARGV  1 now (µs) or "" for TIME; 2 TTL slack (ms); 3 n; then per item
        "release", lease id
        "renew", lease id, TTL (µs)
        "settle", "g", mark (the tat set), delta, T (µs)
        "settle", "w", the window start charged, its end (µs), delta
Reply the number of leases renewed or released that were still held, plus
the number of items settled.
]]

local now
if ARGV[1] == '' then
  local tm = redis.call('TIME')
  now = tonumber(tm[1]) * 1000000 + tonumber(tm[2])
else
  now = tonumber(ARGV[1])
end
local slack = tonumber(ARGV[2])
local n = tonumber(ARGV[3])

local function ttl(d)
  return math.ceil(d / 1000) + slack
end

local held = 0
local a = 4
for i = 1, n do
  local op = ARGV[a]
  if op == 'release' then
    local x = tonumber(redis.call('ZSCORE', KEYS[i], ARGV[a + 1]))
    if x and x > now then held = held + 1 end
    redis.call('ZREM', KEYS[i], ARGV[a + 1])
    a = a + 2
  elseif op == 'renew' then
    local x = tonumber(redis.call('ZSCORE', KEYS[i], ARGV[a + 1]))
    if x and x > now then
      held = held + 1
      local until_ = math.max(x, now + tonumber(ARGV[a + 2]))
      redis.call('ZADD', KEYS[i], 'XX', until_, ARGV[a + 1])
      local px = ttl(until_ - now)
      if redis.call('PTTL', KEYS[i]) < px then redis.call('PEXPIRE', KEYS[i], px) end
    end
    a = a + 3
  elseif op == 'settle' and ARGV[a + 1] == 'g' then
    local mark, delta, T = tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3]), tonumber(ARGV[a + 4])
    local cur = tonumber(redis.call('GET', KEYS[i])) or 0
    local tat = nil
    if delta > 0 then
      tat = math.max(cur, now) + delta * T
    elseif cur == mark then
      tat = mark + delta * T
    end
    if tat ~= nil then
      held = held + 1
      if tat > now then
        redis.call('SET', KEYS[i], tat, 'PX', ttl(tat - now))
      else
        redis.call('DEL', KEYS[i])
      end
    end
    a = a + 5
  elseif op == 'settle' then
    local delta = tonumber(ARGV[a + 4])
    if now < tonumber(ARGV[a + 3]) then
      local count = tonumber(redis.call('HGET', KEYS[i], ARGV[a + 2])) or 0
      local set = math.max(count + delta, 0)
      if set ~= count then
        held = held + 1
        redis.call('HSET', KEYS[i], ARGV[a + 2], set)
        local px = ttl(tonumber(ARGV[a + 3]) - now)
        if redis.call('PTTL', KEYS[i]) < px then redis.call('PEXPIRE', KEYS[i], px) end
      end
    end
    a = a + 5
  else
    return redis.error_reply('ERR throttle: after.lua: unknown operation ' .. tostring(op))
  end
end
return held
