--[[
prelude.lua starts every script of the store: Go puts it in front of
reserve.lua, cancel.lua, after.lua and pause.lua when it loads them
(redisstore.go), so that what they share is written once. Numbers, clock
and TTLs are as reserve.lua's header says.

ARGV  1 now (µs) or "" for the server's TIME (a test's clock passes its
      own; production never does); 2 the TTL slack (ms), or, for
      reserve.lua alone, "peek" (then slack is nil: a peek writes nothing)
Sets  now, slack, drain (quota.PauseDrain, µs) and ttl(d), the TTL in ms
      of state that is idle d µs from now: rounded up, plus the slack.
]]

local now
if ARGV[1] == '' then
  local tm = redis.call('TIME')
  now = tonumber(tm[1]) * 1000000 + tonumber(tm[2])
else
  now = tonumber(ARGV[1])
end
local slack = tonumber(ARGV[2])
local drain = 60000000 -- quota.PauseDrain, µs

local function ttl(d)
  return math.ceil(d / 1000) + slack
end
