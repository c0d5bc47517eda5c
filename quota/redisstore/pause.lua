--[[
pause.lua holds back, for d from now, every request that names this pause
key. A shorter pause never shortens a longer one in force. Numbers, clock
and TTLs are as in reserve.lua: the key holds paused-until (µs) and expires
quota.PauseDrain after it, while reserve.lua may still drain by it.

KEYS  1      the pause key
ARGV  1 now (µs) or "" for TIME; 2 TTL slack (ms); 3 d (µs, > 0)
Reply the paused-until in force.
]]

local now
if ARGV[1] == '' then
  local tm = redis.call('TIME')
  now = tonumber(tm[1]) * 1000000 + tonumber(tm[2])
else
  now = tonumber(ARGV[1])
end
local slack = tonumber(ARGV[2])
local d = tonumber(ARGV[3])
local untl = now + d
local cur = tonumber(redis.call('GET', KEYS[1]))
if cur and cur >= untl then return cur end
local drain = 60000000 -- quota.PauseDrain, µs
redis.call('SET', KEYS[1], untl, 'PX', math.ceil((d + drain) / 1000) + slack)
return untl
