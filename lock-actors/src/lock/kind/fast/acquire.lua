-- Take a non-reentrant fast lock: one string key whose value is the holder.
--
-- | KEYS[1] | the lock's key; value = owner field                           |
-- | KEYS[2] | the waiters' mark `redisson_lock__channel:{name}:waiting`      |
-- | ARGV[1] | lease in milliseconds                                         |
-- | ARGV[2] | owner field `uuid:owner`                                      |
-- | ARGV[3] | `1`: the caller waits if busy (its busy try marks it)         |
-- | returns | nil: acquired; integer: PTTL of the holder                    |
--
-- SET NX succeeds only on a missing key; a key of another type is reported, not replaced.
-- A busy try of a caller that waits marks it, for as long as the holder's key lives: the
-- unlock that finds the mark wakes the waiters; one that does not publishes nothing.
if redis.call('set', KEYS[1], ARGV[2], 'NX', 'PX', ARGV[1]) then
    return nil
end
if redis.call('type', KEYS[1])['ok'] ~= 'string' then
    return redis.error_reply('WRONGTYPE key is not a fast lock')
end
local ttl = redis.call('pttl', KEYS[1])
if ARGV[3] == '1' then
    local mark = ttl
    if mark <= 0 then
        mark = tonumber(ARGV[1]) -- a key without a TTL (written by someone else)
    end
    redis.call('set', KEYS[2], 1, 'PX', mark)
end
return ttl
