-- Helpers prepended to every semaphore script (they read no KEYS or ARGV themselves).
-- Publishes with `publish_command` (`publish` or `spublish`): the client puts the line
-- that sets it first (classic or sharded pub/sub, see connection.rs).
--
-- | helper                            | does                                                  |
-- |-----------------------------------|-------------------------------------------------------|
-- | permits_of(key)                   | the permit count the string `key` holds (0 when       |
-- |                                   | missing); a WRONGTYPE error, before any write, for    |
-- |                                   | any other value                                       |
-- | now_ms()                          | the Redis server's clock in ms (one clock for all)    |
-- | reclaim(key, set, chan, avail, now) | moves every permit of zset `set` whose expiry is   |
-- |                                   | at or before `now` back to `key` (which holds `avail`),|
-- |                                   | publishes the new count on `chan` when positive, and  |
-- |                                   | returns the count; WRONGTYPE if `set` is no zset      |
-- | release(key, set, chan, now, from)| puts every id of ARGV[from…] still in zset `set` back |
-- |                                   | into `key` (expired or not: an expired one was due    |
-- |                                   | back anyway), publishes the new count on `chan` when  |
-- |                                   | positive; returns {released, of which within lease}   |
--
-- Scripts run with effects replication (Redis 5+), so reading TIME before writing is allowed.
local function permits_of(key)
    local value = redis.call('get', key)
    if value == false then
        return 0
    end
    if not string.match(value, '^%-?%d+$') then
        error({err = 'WRONGTYPE key ' .. key .. ' holds a string that is not a permit count'})
    end
    return tonumber(value)
end

local function now_ms()
    local time = redis.call('time')
    return tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
end

local function reclaim(key, set, chan, available, now)
    local expired = redis.call('zremrangebyscore', set, '-inf', now)
    if expired == 0 then
        return available
    end
    local after = redis.call('incrby', key, expired)
    if after > 0 then
        publish(chan, after)
    end
    return after
end

local function release(key, set, chan, now, from)
    permits_of(key)
    local released, live = 0, 0
    for i = from, #ARGV do
        local expiry = redis.call('zscore', set, ARGV[i])
        if expiry then
            redis.call('zrem', set, ARGV[i])
            released = released + 1
            if tonumber(expiry) > now then
                live = live + 1
            end
        end
    end
    if released > 0 then
        local after = redis.call('incrby', key, released)
        if after > 0 then
            publish(chan, after)
        end
    end
    return {released, live}
end
