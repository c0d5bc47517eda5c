--[[
refusals.lua keeps the fleet's record of recent refusals (refusals.go):
decisions write nothing when they refuse, so a RefusalLog counts its
process's refusals and adds them here at most once per interval, and
throttle status reads them back. Numbers and clock are as in reserve.lua.

KEYS  one per provider and limit, <prefix>{!refusals}:<provider>:<limit>,
      a hash: field <minute> (minutes since the epoch on the store's
      clock) -> refusals counted in it, field "last" -> "<at µs>
      <retry-after µs>", the latest refusal and what it was told
ARGV  1 now (µs) or "" for TIME; 2 the TTL slack (ms), or "read";
      to add, then per key: the count, the age of its latest refusal
      (µs, on the process's clock), and that refusal's retry-after (µs)
Reply read: {now, per key its fields and values, as HGETALL}; add: the
      minute counted in

A key lives an hour after its last refusal. Fields of minutes an hour
old go once a key holds more than 62 fields (an hour of minutes and
"last"): one HKEYS, at most once a minute per key.
]]

-- now and ttl come from prelude.lua.
if ARGV[2] == 'read' then
  local out = {now}
  for i = 1, #KEYS do out[i + 1] = redis.call('HGETALL', KEYS[i]) end
  return out
end

local minute = math.floor(now / 60000000)
for i = 1, #KEYS do
  local k, a = KEYS[i], 3 * i
  redis.call('HINCRBY', k, minute, ARGV[a])
  local at = now - tonumber(ARGV[a + 1])
  local last = redis.call('HGET', k, 'last')
  if not last or tonumber(string.match(last, '^%d+')) < at then
    redis.call('HSET', k, 'last', string.format('%d %s', at, ARGV[a + 2]))
  end
  if redis.call('HLEN', k) > 62 then
    for _, f in ipairs(redis.call('HKEYS', k)) do
      local m = tonumber(f)
      if m and m <= minute - 60 then redis.call('HDEL', k, f) end
    end
  end
  redis.call('PEXPIRE', k, ttl(3600000000))
end
return minute
