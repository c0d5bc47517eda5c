--[[
after.lua acts on an admitted reservation after its request went: one call
per response, whatever operations apply, with an op code per item. Numbers,
clock and TTLs are as in reserve.lua.

Op "sync" (package quota's doc, "Sync"): the vendor reported R, how many
more events of cost 1 it admits, in the limit's units. The limit is
drained so that it admits at most R more at once on top of the
reservations made after this one, and is never loosened:

  GCRA    after = max(0, cur - mark), where cur is the stored tat and
          mark the tat this reservation set: what the reservations
          charged after it occupy (tats only grow through reservations).
          tat = now + DVT - R*T + after is stored when it is later than
          both cur and now. The holes key is left alone: a tat raised
          above every live mark makes a later Cancel of an earlier
          reservation a hole, and one of a later reservation goes back at
          most to this tat.
  window  the window charged, while it has not ended: after = max(0,
          count - count at mark), where count at mark is the window's
          count right after this reservation's charge; the count becomes
          Rate - R + after when that is more. The key's TTL is only ever
          lengthened, to at least that window's end.

A key that is gone (expired, flushed) reads as 0: the sync then rebuilds
the state from the vendor's figure.

KEYS  1..n   the item keys, in the order of ARGV's items
ARGV  1 now (µs) or "" for TIME; 2 TTL slack (ms); 3 n; then per item an
      op and its arguments:
        "sync", "g", T (µs), DVT (µs), R, mark (µs)
        "sync", "w", rate, R, window start (µs, as reserve.lua wrote it),
                     window end (µs), count at mark
      where 0 <= R <= the limit's capacity
Reply the number of keys changed.
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

local changed = 0
local a = 4
for i = 1, n do
  local op, kind = ARGV[a], ARGV[a + 1]
  if op ~= 'sync' then
    return redis.error_reply('ERR throttle: after.lua: unknown op ' .. tostring(op))
  end
  if kind == 'g' then
    local T, dvt = tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3])
    local r, mark = tonumber(ARGV[a + 4]), tonumber(ARGV[a + 5])
    local cur = tonumber(redis.call('GET', KEYS[i])) or 0
    local after = math.max(cur - mark, 0)
    local tat = now + dvt - r * T + after
    if tat > cur and tat > now then
      redis.call('SET', KEYS[i], tat, 'PX', ttl(tat - now))
      changed = changed + 1
    end
    a = a + 6
  else
    local rate, r = tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3])
    local field, wend = ARGV[a + 4], tonumber(ARGV[a + 5])
    local atmark = tonumber(ARGV[a + 6])
    if now < wend then
      local cur = tonumber(redis.call('HGET', KEYS[i], field)) or 0
      local after = math.max(cur - atmark, 0)
      local count = rate - r + after
      if count > cur then
        redis.call('HSET', KEYS[i], field, count)
        local px = ttl(wend - now)
        local left = redis.call('PTTL', KEYS[i])
        if left > px then px = left end
        redis.call('PEXPIRE', KEYS[i], px)
        changed = changed + 1
      end
    end
    a = a + 7
  end
end
return changed
