-- Take (or re-enter) a reentrant lock and draw a fencing token for this hold.
--
-- | KEYS[1] | the lock's hash; field = owner, value = hold count                  |
-- | KEYS[2] | the token counter `redisson_lock_token:{name}` (never expires)       |
-- | ARGV[1] | lease in milliseconds                                                |
-- | ARGV[2] | owner field `uuid:owner`                                             |
-- | returns | {token}: acquired, token strictly above every earlier one; integer:  |
-- |         | PTTL of the holder                                                   |
if redis.call('exists', KEYS[1]) == 0 or redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return { redis.call('incr', KEYS[2]) }
end
return redis.call('pttl', KEYS[1])
