-- Take (or re-enter) a reentrant lock and draw a fencing token for this hold.
--
-- | KEYS[1] | the lock's hash; field = owner, value = hold count                  |
-- | KEYS[2] | the token counter `redisson_lock_token:{name}` (never expires)       |
-- | ARGV[1] | lease in milliseconds                                                |
-- | ARGV[2] | owner field `uuid:owner`                                             |
-- | returns | {token, 0}: acquired, the owner's first hold; {token}: re-entered;   |
-- |         | the token strictly above every earlier one; integer: PTTL of the     |
-- |         | holder                                                               |
--
-- A script that fails half-way keeps what it wrote, so every step that can fail on
-- foreign data comes before the first write: HEXISTS fails on a lock key that is not a
-- hash, INCR on a counter that is not an integer (any type, or a string that is no
-- integer: both are reported as WRONGTYPE). Only then is the hold written, so a failure
-- leaves nothing behind and a retry never stacks a hold.
local fresh = redis.call('exists', KEYS[1]) == 0
if fresh or redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    local token = redis.pcall('incr', KEYS[2])
    if type(token) == 'table' and token.err then
        return redis.error_reply('WRONGTYPE the fencing token counter is not an integer: ' .. token.err)
    end
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    if fresh then
        redis.call('pexpire', KEYS[1], ARGV[1])
        return { token, 0 }
    end
    -- Never shorter than what the owner's other holds have left (the TTL is shared).
    redis.call('pexpire', KEYS[1], math.max(redis.call('pttl', KEYS[1]), tonumber(ARGV[1])))
    return { token }
end
return redis.call('pttl', KEYS[1])
