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
if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then
    return nil
end
local holds = redis.call('hincrby', KEYS[1], ARGV[3], -1)
if holds > 0 then
    redis.call('pexpire', KEYS[1], ARGV[2])
    return 0
end
redis.call('del', KEYS[1])
redis.call(publish_command, KEYS[2], ARGV[1])
return 1
