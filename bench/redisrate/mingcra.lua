--[[
mingcra.lua is the least a GCRA decision can do in one round trip, for
BenchmarkCompare's floor/min-gcra case: read the server's clock, read the
key's tat, write the new one with its expiry, reply. No stack, no pauses,
no windows, no denial path: a reference for what any one-limit store
costs, not a limiter.

KEYS 1 the key. ARGV 1 cost, 2 T (µs), 3 DVT (µs). Reply: allowed, now,
slot, decider, remaining, reset after, tat set, tat read (reserve.lua's
reply for one item).
]]
local tm = redis.call('TIME')
local now = tonumber(tm[1]) * 1000000 + tonumber(tm[2])
local cost, T, dvt = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local stored = tonumber(redis.call('GET', KEYS[1])) or 0
local tat = math.max(stored, now)
local t = math.max(now, tat + cost * T - dvt)
local set = math.max(tat, t) + cost * T
redis.call('SET', KEYS[1], set, 'PX', math.ceil((set - now) / 1000))
return {1, now, t, -1, math.floor((dvt - (set - t)) / T), set - now, set, stored}
