--[[
minstack.lua is the least a decision of BenchmarkCompare's 3-limit stack
(two GCRA limits and a calendar window) can do in one round trip, for its
floor/min-stack case: read the server's clock, the two keys' tats and
the count of the window of now, write the two new tats with their expiry
and the window's new count, reply. No pauses, no window starts or
expiry, no rounds, no denial path: a reference for what any store of
that stack costs in Redis, as mingcra.lua is for one limit, not a
limiter.

KEYS 1 and 2 the GCRA keys, 3 the window's. ARGV 1 cost, 2 and 3 T and
DVT (µs) of the first GCRA limit, 4 and 5 of the second, 6 the field of
the window of now, 7 the window's rate. Reply: reserve.lua's for a
request of the three items (allowed, now, slot, decider, then remaining,
reset after, mark and prev of each item).
]]
local tm = redis.call('TIME')
local now = tonumber(tm[1]) * 1000000 + tonumber(tm[2])
local cost = tonumber(ARGV[1])
local T1, dvt1, T2, dvt2 = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local s1 = tonumber(redis.call('GET', KEYS[1])) or 0
local s2 = tonumber(redis.call('GET', KEYS[2])) or 0
local count = tonumber(redis.call('HGET', KEYS[3], ARGV[6])) or 0
local tat1, tat2 = math.max(s1, now), math.max(s2, now)
local t = math.max(now, tat1 + cost * T1 - dvt1, tat2 + cost * T2 - dvt2)
local set1, set2 = math.max(tat1, t) + cost * T1, math.max(tat2, t) + cost * T2
redis.call('SET', KEYS[1], set1, 'PX', math.ceil((set1 - now) / 1000))
redis.call('SET', KEYS[2], set2, 'PX', math.ceil((set2 - now) / 1000))
redis.call('HINCRBY', KEYS[3], ARGV[6], cost)
return {1, now, t, -1,
  math.floor((dvt1 - (set1 - t)) / T1), set1 - now, set1, s1,
  math.floor((dvt2 - (set2 - t)) / T2), set2 - now, set2, s2,
  tonumber(ARGV[7]) - count - cost, 0, tonumber(ARGV[6]), 0}
