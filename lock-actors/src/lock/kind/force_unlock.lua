-- Delete a lock whoever holds it, and wake its waiters.
-- Publishes with `publish_command` (`publish` or `spublish`): the client puts the line
-- that sets it first (classic or sharded pub/sub, see connection.rs).
--
-- | KEYS[1] | the lock's key                                            |
-- | KEYS[2] | the lock's unlock channel                                 |
-- | ARGV[1] | the message to publish                                    |
-- | ARGV[2] | the key type this kind of lock uses (`hash`, `string`)    |
-- | returns | 1: a lock was deleted; 0: there was none                  |
--
-- A key of another type holds non-lock data: it is left alone and reported.
local kind = redis.call('type', KEYS[1])['ok']
if kind == 'none' then
    return 0
end
if kind ~= ARGV[2] then
    return redis.error_reply('WRONGTYPE key is not a lock of this kind')
end
-- Publish before deleting: a refused PUBLISH (ACL) fails the script before any write.
publish(KEYS[2], ARGV[1])
redis.call('del', KEYS[1])
return 1
