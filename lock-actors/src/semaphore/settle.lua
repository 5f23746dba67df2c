-- Settle a plain acquire whose reply was lost: it may have run, or may still run (a late
-- copy on a connection that was replaced). Its permits go back if it took them; if it has
-- not run, a marker makes it take nothing when it does.
-- Publishes with `publish_command` (`publish` or `spublish`): the client puts the line
-- that sets it first (classic or sharded pub/sub, see connection.rs).
--
-- | KEYS[1] | the semaphore's string key                                           |
-- | KEYS[2] | its channel `redisson_sc:{name}`                                     |
-- | KEYS[3] | the acquire's receipt `{name}:semaphore_acquire:<request id>`         |
-- | ARGV[1] | the permits the acquire asked for                                    |
-- | ARGV[2] | how long the marker lives, in ms                                     |
-- | returns | 1: it had taken them, now given back; 0: it took nothing (and never will) |
local receipt = redis.call('get', KEYS[3])
if receipt == 'taken' then
    permits_of(KEYS[1])
    redis.call('del', KEYS[3])
    local after = redis.call('incrby', KEYS[1], ARGV[1])
    if after > 0 then
        publish(KEYS[2], after)
    end
    return 1
end
if receipt == false then
    redis.call('set', KEYS[3], 'settled', 'px', ARGV[2])
end
return 0
