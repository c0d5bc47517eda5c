--[[
cancel.lua gives back what an admitted reservation may, per package
quota's doc, "Cancel". Numbers, clock and TTLs are as in reserve.lua.

If the slot time has come, nothing is given back. Otherwise each GCRA limit
gives back the part of its cost that no later reservation depends on:
later = clamp(stored tat - tat this reservation set, 0, cost*T), refund =
cost*T - later; a tat moved back to or before now is idle, so the key is
deleted. Each window gives the cost back to the window it was charged to,
while that window has not ended, never taking a count below zero.

KEYS  1..n   the reservation's item keys, in stack order
ARGV  1 now (µs) or "" for TIME; 2 TTL slack (ms); 3 t, the slot time (µs);
      then per item either
        "g", cost, T (µs), the tat this reservation set (µs), or
        "w", cost, the window start charged (µs, as reserve.lua wrote it),
             that window's end (µs)
      where cost is what the reservation counted for in that limit
Reply 1 when the slot time had not come, else 0.
]]

local now
if ARGV[1] == '' then
  local tm = redis.call('TIME')
  now = tonumber(tm[1]) * 1000000 + tonumber(tm[2])
else
  now = tonumber(ARGV[1])
end
local slack = tonumber(ARGV[2])
local t = tonumber(ARGV[3])
if now >= t then return 0 end

local a = 4
for i = 1, #KEYS do
  local cost = tonumber(ARGV[a + 1])
  if ARGV[a] == 'g' then
    local own = cost * tonumber(ARGV[a + 2])
    local mark = tonumber(ARGV[a + 3])
    local cur = tonumber(redis.call('GET', KEYS[i])) or 0
    local later = math.min(math.max(cur - mark, 0), own)
    local refund = own - later
    if refund > 0 then
      local set = cur - refund
      if set > now then
        redis.call('SET', KEYS[i], set, 'PX', math.ceil((set - now) / 1000) + slack)
      else
        redis.call('DEL', KEYS[i])
      end
    end
  elseif now < tonumber(ARGV[a + 3]) then
    local count = tonumber(redis.call('HGET', KEYS[i], ARGV[a + 2]))
    if count and count > 0 then
      redis.call('HINCRBY', KEYS[i], ARGV[a + 2], -math.min(cost, count))
    end
  end
  a = a + 4
end
return 1
