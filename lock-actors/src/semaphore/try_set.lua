-- Set a semaphore's permits only if they were never set (Redisson's trySetPermits).
-- Publishes with `publish_command` (`publish` or `spublish`): the client puts the line
-- that sets it first (classic or sharded pub/sub, see connection.rs).
--
-- | KEYS[1] | the semaphore's string key                                          |
-- | KEYS[2] | its channel `redisson_sc:{name}`                                    |
-- | ARGV[1] | the permits                                                        |
-- | returns | 1: set (and published); 0: the key already existed, nothing changed |
if redis.call('exists', KEYS[1]) == 1 then
    permits_of(KEYS[1])
    return 0
end
redis.call('set', KEYS[1], ARGV[1])
publish(KEYS[2], ARGV[1])
return 1
