-- Release permits of a permit-expirable semaphore by id.
-- Publishes with `publish_command` (`publish` or `spublish`): the client puts the line
-- that sets it first (classic or sharded pub/sub, see connection.rs).
--
-- | KEYS[1] | the semaphore's string key                                          |
-- | KEYS[2] | its channel `redisson_sc:{name}`                                    |
-- | KEYS[3] | the zset `{name}:timeout`: permit id → expiry                       |
-- | ARGV[…] | the permit ids to release                                          |
-- | returns | {released, of which still within their lease}                      |
--
-- Every id still in the zset goes back to the count, expired or not (an expired one was
-- due back anyway); ids not there (released, or reclaimed after expiring) change nothing.
-- Publishes the new count when permits went back.
permits_of(KEYS[1])
local now = now_ms()
local released, live = 0, 0
for i = 1, #ARGV do
    local expiry = redis.call('zscore', KEYS[3], ARGV[i])
    if expiry then
        redis.call('zrem', KEYS[3], ARGV[i])
        released = released + 1
        if tonumber(expiry) > now then
            live = live + 1
        end
    end
end
if released > 0 then
    local after = redis.call('incrby', KEYS[1], released)
    if after > 0 then
        publish(KEYS[2], after)
    end
end
return {released, live}
