-- Take a non-reentrant fast lock: one string key whose value is the holder.
--
-- | KEYS[1] | the lock's key; value = owner field                           |
-- | ARGV[1] | lease in milliseconds                                         |
-- | ARGV[2] | owner field `uuid:owner`                                      |
-- | returns | nil: acquired; integer: PTTL of the holder                    |
--
-- SET NX succeeds only on a missing key; a key of another type is reported, not replaced.
if redis.call('set', KEYS[1], ARGV[2], 'NX', 'PX', ARGV[1]) then
    return nil
end
if redis.call('type', KEYS[1])['ok'] ~= 'string' then
    return redis.error_reply('WRONGTYPE key is not a fast lock')
end
return redis.call('pttl', KEYS[1])
