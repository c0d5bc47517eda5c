--[[
pause.lua holds back, for d from now, every request that names this pause
key. A shorter pause never shortens a longer one in force. Numbers, clock
and TTLs are as in reserve.lua: the key holds paused-until (µs) and expires
quota.PauseDrain after it, while reserve.lua may still drain by it.

KEYS  1      the pause key; 2 its reason key (reason.go)
ARGV  1 now (µs) or "" for TIME; 2 TTL slack (ms); 3 d (µs, > 0);
      4 the channel pauses are announced on; 5 the reason, or "" for none
Reply {paused-until in force, now} (µs): Store.PauseOver copies the
pause with the TTL it has.

A pause that is set writes its reason beside it, "<paused-until> <now>
<reason>" with the same TTL, or deletes the reason of the pause it
replaces when it has none: the reason key always describes the pause in
force, which its paused-until lets a reader check. A pause that changes
nothing leaves both as they are. Decisions never read the reason.

A pause that is set is announced: PUBLISH "<d> <pause key>" on the
store's pause channel, for the processes whose requests wait for slots
reserved before it (notify.go). Only the length goes out: each listener
holds the pause from when it hears of it, on its own clock.
]]

-- now, slack, ttl and drain come from prelude.lua.
local d = tonumber(ARGV[3])
local untl = now + d
local cur = tonumber(redis.call('GET', KEYS[1]))
if cur and cur >= untl then return {cur, now} end
local px = ttl(d + drain)
redis.call('SET', KEYS[1], untl, 'PX', px)
if ARGV[5] ~= '' then
  redis.call('SET', KEYS[2], string.format('%d %d ', untl, now) .. ARGV[5], 'PX', px)
else
  redis.call('DEL', KEYS[2])
end
redis.pcall('PUBLISH', ARGV[4], ARGV[3] .. ' ' .. KEYS[1])
return {untl, now}
