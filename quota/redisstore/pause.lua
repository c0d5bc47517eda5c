--[[
pause.lua holds back, for d from now, every request that names this pause
key. A shorter pause never shortens a longer one in force. Numbers, clock
and TTLs are as in reserve.lua: the key holds paused-until (µs) and expires
quota.PauseDrain after it, while reserve.lua may still drain by it.

KEYS  1      the pause key
ARGV  1 now (µs) or "" for TIME; 2 TTL slack (ms); 3 d (µs, > 0)
Reply the paused-until in force.
]]

-- now, slack, ttl and drain come from prelude.lua.
local d = tonumber(ARGV[3])
local untl = now + d
local cur = tonumber(redis.call('GET', KEYS[1]))
if cur and cur >= untl then return cur end
redis.call('SET', KEYS[1], untl, 'PX', ttl(d + drain))
return untl
