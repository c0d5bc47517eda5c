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

KEYS  the items' keys, one per item below
ARGV  1 now (µs) or "" for TIME; 2 TTL slack (ms); 3 n; then per item
        "release", lease id
        "renew", lease id, TTL (µs)
Reply the number of leases renewed or released that were still held.
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
  else
    return redis.error_reply('ERR throttle: after.lua: unknown operation ' .. tostring(op))
  end
end
return held
