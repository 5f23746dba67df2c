-- Take (or re-enter) the read side of a read-write lock.
--
-- | KEYS[1] | the lock's hash: `mode` = read/write, owner fields = hold counts       |
-- | KEYS[2] | this reader's timeout prefix `{name}:uuid:owner:rwlock_timeout`       |
-- | ARGV[1] | lease in milliseconds                                                 |
-- | ARGV[2] | owner field `uuid:owner`                                              |
-- | ARGV[3] | the same owner's writer field `uuid:owner:write`                      |
-- | returns | status OK: acquired, the owner's first read hold; nil: re-entered;    |
-- |         | integer: PTTL of the lock held by a writer                            |
--
-- Each read hold n also gets its own key `<KEYS[2]>:n` with the hold's lease, so a dead
-- reader's holds expire one by one while other readers keep the hash alive.
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false then
    if redis.call('exists', KEYS[1]) == 1 then
        return redis.call('pttl', KEYS[1]) -- a hash of another lock kind: wait for it
    end
    redis.call('hset', KEYS[1], 'mode', 'read', ARGV[2], 1)
    redis.call('set', KEYS[2] .. ':1', 1, 'PX', ARGV[1])
    redis.call('pexpire', KEYS[1], ARGV[1])
    return redis.status_reply('OK')
end
if mode == 'read' or (mode == 'write' and redis.call('hexists', KEYS[1], ARGV[3]) == 1) then
    local hold = redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('set', KEYS[2] .. ':' .. hold, 1, 'PX', ARGV[1])
    local left = redis.call('pttl', KEYS[1])
    redis.call('pexpire', KEYS[1], math.max(left, tonumber(ARGV[1])))
    if hold == 1 then
        return redis.status_reply('OK')
    end
    return nil
end
return redis.call('pttl', KEYS[1])
