-- Take (or re-enter) a reentrant lock.
--
-- | KEYS[1] | the lock's hash; field = owner, value = hold count          |
-- | ARGV[1] | lease in milliseconds                                        |
-- | ARGV[2] | owner field `uuid:owner`                                     |
-- | returns | status OK: acquired, the owner's first hold; nil: re-entered; |
-- |         | integer: PTTL of the holder                                  |
--
-- The first hold says so: an owner that counts holds of its own when Redis had none (a
-- failover to a replica that never saw them) has lost them, and must be told. A status
-- reply, which the client reads without allocating: this is the uncontended path.
-- HEXISTS fails with WRONGTYPE on a key that is not a hash, before anything is written.
-- A re-entry never shortens the key: its TTL is shared by every hold the owner has, so it
-- becomes the larger of what is left and this hold's lease.
if redis.call('exists', KEYS[1]) == 0 then
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return redis.status_reply('OK')
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], math.max(redis.call('pttl', KEYS[1]), tonumber(ARGV[1])))
    return nil
end
return redis.call('pttl', KEYS[1])
