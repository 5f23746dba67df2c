-- Release one write hold. The last one frees the lock (waking every waiter), or, when the
-- Publishes with `publish_command` (`publish` or `spublish`): the client puts the line
-- that sets it first (classic or sharded pub/sub, see connection.rs).
-- same owner also took read holds, turns it into a read lock (waking every waiter).
--
-- | KEYS[1] | the lock's hash                                                       |
-- | KEYS[2] | the read-write channel `redisson_rwlock:{name}`                      |
-- | ARGV[1] | the message to publish when freed (`1`: wakes all, as Redisson's)     |
-- | ARGV[2] | lease in milliseconds, set again while holds remain                   |
-- | ARGV[3] | writer field `uuid:owner:write`                                       |
-- | ARGV[4] | the message to publish when readers remain (`1`)                      |
-- | returns | nil: not the writer; 0: still held (holds remain); 1: released        |
if redis.call('hget', KEYS[1], 'mode') ~= 'write' or redis.call('hexists', KEYS[1], ARGV[3]) == 0 then
    return nil
end
local holds = redis.call('hincrby', KEYS[1], ARGV[3], -1)
if holds > 0 then
    redis.call('pexpire', KEYS[1], ARGV[2])
    return 0
end
redis.call('hdel', KEYS[1], ARGV[3])
if redis.call('hlen', KEYS[1]) == 1 then
    redis.call('del', KEYS[1])
    publish(KEYS[2], ARGV[1])
    return 1
end
redis.call('hset', KEYS[1], 'mode', 'read')
publish(KEYS[2], ARGV[4])
return 1
