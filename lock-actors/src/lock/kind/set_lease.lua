-- Restart one owner's lease: the TTL of the lock's key becomes ARGV[1] if the owner holds
-- it, for a hold whose lease is set again from now (a MultiLock member once its set is
-- complete). Owner-checked, and never below another owner's holds.
--
-- | KEYS[1] | the lock's key: a hash of owner fields, or a fast lock's string          |
-- | ARGV[1] | the longest lease the owner's holds have left, in milliseconds          |
-- | ARGV[2] | the owner field `uuid:owner` (a writer's ends in `:write`)              |
-- | ARGV[3] | the key's type: `hash` or `string`                                      |
-- | returns | the key's PTTL after the call when the owner holds it; 0 when it does   |
-- |         | not (the hold is gone)                                                  |
--
-- The key's TTL is shared by every hold on it: where other fields hold it too (other
-- readers, a writer's own read holds), the TTL is only ever extended.
local held
if ARGV[3] == 'string' then
    local ok, value = pcall(redis.call, 'get', KEYS[1])
    held = ok and value == ARGV[2]
else
    held = redis.pcall('hexists', KEYS[1], ARGV[2]) == 1
end
if not held then
    return 0
end
local ttl = tonumber(ARGV[1])
if ARGV[3] == 'hash' then
    local others = redis.call('hlen', KEYS[1]) - 1 - redis.call('hexists', KEYS[1], 'mode')
    if others > 0 then
        ttl = math.max(ttl, redis.call('pttl', KEYS[1]))
    end
end
redis.call('pexpire', KEYS[1], ttl)
return redis.call('pttl', KEYS[1])
