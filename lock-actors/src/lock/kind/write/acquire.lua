-- Take (or re-enter) the write side of a read-write lock.
--
-- | KEYS[1] | the lock's hash: `mode` = read/write, owner fields = hold counts       |
-- | ARGV[1] | lease in milliseconds                                                 |
-- | ARGV[2] | writer field `uuid:owner:write`                                       |
-- | returns | status OK: acquired, the owner's first hold; nil: re-entered;         |
-- |         | integer: PTTL of the lock held by others                              |
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false then
    if redis.call('exists', KEYS[1]) == 1 then
        return redis.call('pttl', KEYS[1]) -- a hash of another lock kind: wait for it
    end
    redis.call('hset', KEYS[1], 'mode', 'write', ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return redis.status_reply('OK')
end
if mode == 'write' and redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    local left = redis.call('pttl', KEYS[1])
    redis.call('pexpire', KEYS[1], math.max(left, tonumber(ARGV[1])))
    return nil
end
return redis.call('pttl', KEYS[1])
