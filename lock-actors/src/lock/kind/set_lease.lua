-- Set one owner's lease again from now: the TTL of the lock's key becomes ARGV[1] if the
-- owner holds it (a hold's lease extended or cut back by its guard, a MultiLock member's
-- restarted once its set is complete). Owner-checked, and never below another holder's.
--
-- | KEYS[1] | the lock's key: a hash of owner fields, or a fast lock's string          |
-- | KEYS[2] | a reader's timeout prefix `{name}:uuid:owner:rwlock_timeout` (read kind) |
-- | ARGV[1] | the longest lease the owner's holds have left, in milliseconds          |
-- | ARGV[2] | the owner field `uuid:owner` (a writer's ends in `:write`)              |
-- | ARGV[3] | the key's type: `hash` or `string`                                      |
-- | ARGV[4] | how many holds of the field the caller counts (hash kinds)             |
-- | returns | the key's PTTL after the call when the owner holds it; 0 when it does   |
-- |         | not (the hold is gone)                                                  |
--
-- The key's TTL is shared by every hold on it: where other fields hold it too (other
-- readers, a writer's own read holds), or the field has holds the caller does not count
-- (the same owner in another process), the TTL is only ever extended. A reader's timeout
-- keys carry its holds' leases (Redisson's read unlock sets the hash's TTL from them), so
-- they are set with it.
local ttl = tonumber(ARGV[1])
local holds = 1
local shared = false
if ARGV[3] == 'string' then
    local ok, value = pcall(redis.call, 'get', KEYS[1])
    if not (ok and value == ARGV[2]) then
        return 0
    end
else
    local ok, count = pcall(redis.call, 'hget', KEYS[1], ARGV[2])
    holds = ok and tonumber(count)
    if not holds then
        return 0
    end
    local others = redis.call('hlen', KEYS[1]) - 1 - redis.call('hexists', KEYS[1], 'mode')
    shared = others > 0
    local uncounted = holds > tonumber(ARGV[4])
    if KEYS[2] then
        for n = 1, holds do
            local key = KEYS[2] .. ':' .. n
            if not uncounted or redis.call('pttl', key) < ttl then
                redis.call('set', key, 1, 'PX', ttl)
            end
        end
    end
    shared = shared or uncounted
end
if shared then
    ttl = math.max(ttl, redis.call('pttl', KEYS[1]))
end
redis.call('pexpire', KEYS[1], ttl)
return redis.call('pttl', KEYS[1])
