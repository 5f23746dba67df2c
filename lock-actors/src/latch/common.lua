-- Helpers prepended to every latch script (they read no KEYS or ARGV themselves).
-- Publishes with `publish_command` (`publish` or `spublish`): the client puts the line
-- that sets it first (classic or sharded pub/sub, see connection.rs).
--
-- | helper        | does                                                                  |
-- |---------------|-----------------------------------------------------------------------|
-- | count_of(key) | the count the string `key` holds, as stored (false when missing); a   |
-- |               | WRONGTYPE error, before any write, for a key that holds anything but  |
-- |               | a whole number (another type, or a string of other text)             |
--
-- The messages are Redisson's (`CountDownLatchPubSub`): `0` says the count reached zero,
-- `1` that a new count was set.
local function count_of(key)
    local value = redis.call('get', key)
    if value == false then
        return false
    end
    if not string.match(value, '^%-?%d+$') then
        error({err = 'WRONGTYPE key ' .. key .. ' holds a string that is not a latch count'})
    end
    return value
end
