-- Release one hold of a reentrant lock; publish on the channel when it is freed.
-- Publishes with `publish_command` (`publish` or `spublish`): the client puts the line
-- that sets it first (classic or sharded pub/sub, see connection.rs).
--
-- | KEYS[1] | the lock's hash                                                  |
-- | KEYS[2] | the unlock channel `redisson_lock__channel:{name}`               |
-- | ARGV[1] | the message to publish when freed (`0`)                          |
-- | ARGV[2] | lease in milliseconds, set again while holds remain              |
-- | ARGV[3] | owner field `uuid:owner`                                         |
-- | returns | nil: not the owner; 0: still held (holds remain); 1: freed       |
--
-- The last hold publishes before it deletes: a refused PUBLISH (an ACL user without the
-- channel) then fails the script before any write, so the lock is left as it was.
local holds = redis.call('hget', KEYS[1], ARGV[3])
if holds == false then
    return nil
end
if tonumber(holds) > 1 then
    redis.call('hincrby', KEYS[1], ARGV[3], -1)
    redis.call('pexpire', KEYS[1], ARGV[2])
    return 0
end
publish(KEYS[2], ARGV[1])
redis.call('del', KEYS[1])
return 1
