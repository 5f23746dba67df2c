-- Settle a permit-expirable acquire whose reply was lost: it may have run, or may still
-- run (a late copy on a connection that was replaced). The permits it took go back by id,
-- and a marker makes a copy that has not run yet take nothing when it does.
-- Publishes with `publish_command` (`publish` or `spublish`): the client puts the line
-- that sets it first (classic or sharded pub/sub, see connection.rs).
--
-- | KEYS[1] | the semaphore's string key                                           |
-- | KEYS[2] | its channel `redisson_sc:{name}`                                     |
-- | KEYS[3] | the zset `{name}:timeout`: permit id → expiry                        |
-- | KEYS[4] | the acquire's marker `{name}:semaphore_acquire:<request id>`          |
-- | ARGV[1] | how long the marker lives, in ms                                     |
-- | ARGV[2…] | the permit ids the acquire asked for                                |
-- | returns | {released, of which still within their lease}: 0 released when it   |
-- |         | took nothing (and never will)                                        |
local released = release(KEYS[1], KEYS[3], KEYS[2], now_ms(), 2)
if redis.call('exists', KEYS[4]) == 0 then
    redis.call('set', KEYS[4], 'settled', 'px', ARGV[1])
end
return released
