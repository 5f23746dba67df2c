-- Release a fast lock if this owner holds it (compare and delete); wake the waiters.
-- Publishes with `publish_command` (`publish` or `spublish`): the client puts the line
-- that sets it first (classic or sharded pub/sub, see connection.rs).
--
-- | KEYS[1] | the lock's key                                                   |
-- | KEYS[2] | the unlock channel `redisson_lock__channel:{name}`               |
-- | KEYS[3] | the waiters' mark `<KEYS[2]>:waiting` (see acquire.lua)          |
-- | ARGV[1] | the message to publish when freed (`0`)                          |
-- | ARGV[2] | lease in milliseconds (unused: a fast lock has one hold)         |
-- | ARGV[3] | owner field `uuid:owner`                                         |
-- | returns | nil: not the owner; 1: freed                                     |
local ok, holder = pcall(redis.call, 'get', KEYS[1])
if not ok or holder ~= ARGV[3] then
    return nil
end
-- Wakes the waiters only if one marked that it waits. Publish before deleting: a refused
-- PUBLISH (ACL) fails the script before any write.
if redis.call('get', KEYS[3]) then
    publish(KEYS[2], ARGV[1])
    redis.call('del', KEYS[3])
end
redis.call('del', KEYS[1])
return 1
