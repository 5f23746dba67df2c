-- Delete a lock whoever holds it, and wake a waiter.
--
-- | KEYS[1] | the lock's hash                                   |
-- | KEYS[2] | the unlock channel                                |
-- | ARGV[1] | the message to publish (`0`)                      |
-- | returns | 1: a lock was deleted; 0: there was none          |
--
-- TYPE guards non-lock data: a key that is not a hash is left alone and reported.
local kind = redis.call('type', KEYS[1])['ok']
if kind == 'none' then
    return 0
end
if kind ~= 'hash' then
    return redis.error_reply('WRONGTYPE key is not a lock')
end
redis.call('del', KEYS[1])
redis.call('publish', KEYS[2], ARGV[1])
return 1
