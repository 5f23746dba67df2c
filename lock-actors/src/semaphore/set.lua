-- Set a semaphore's permits whatever they were (Redisson's setPermits).
-- Publishes with `publish_command` (`publish` or `spublish`): the client puts the line
-- that sets it first (classic or sharded pub/sub, see connection.rs).
--
-- | KEYS[1] | the semaphore's string key                                          |
-- | KEYS[2] | its channel `redisson_sc:{name}`                                    |
-- | KEYS[3] | permit-expirable only: the zset `{name}:timeout` of permit → expiry |
-- | ARGV[1] | the permits: available ones (plain), or in all (permit-expirable)   |
-- | returns | the available permits after                                        |
--
-- A permit-expirable semaphore first takes back expired permits, then sets the count to
-- ARGV[1] minus the permits still held, so the total is ARGV[1].
permits_of(KEYS[1])
local after = tonumber(ARGV[1])
if #KEYS == 3 then
    redis.call('zremrangebyscore', KEYS[3], '-inf', now_ms())
    after = after - redis.call('zcard', KEYS[3])
end
redis.call('set', KEYS[1], after)
if after > 0 then
    publish(KEYS[2], after)
end
return after
