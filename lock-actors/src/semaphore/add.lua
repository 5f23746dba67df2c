-- Add permits to a semaphore: a release of plain permits, or add_permits (either kind).
-- Publishes with `publish_command` (`publish` or `spublish`): the client puts the line
-- that sets it first (classic or sharded pub/sub, see connection.rs).
--
-- | KEYS[1] | the semaphore's string key                                          |
-- | KEYS[2] | its channel `redisson_sc:{name}`                                    |
-- | ARGV[1] | permits to add (negative takes permits away, as Redisson allows)   |
-- | returns | the available permits after                                        |
--
-- Publishes the new count when it is positive: Redisson's waiters read the message as the
-- number of permits that may be free, ours as a wake-up.
permits_of(KEYS[1])
local after = redis.call('incrby', KEYS[1], ARGV[1])
if tonumber(ARGV[1]) > 0 and after > 0 then
    publish(KEYS[2], after)
end
return after
