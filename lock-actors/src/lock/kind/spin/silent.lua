-- The spin lock's `publish`, joined where the other kinds join `publish.lua`: it tells
-- nobody. Its waiters poll with a backoff instead of listening on a channel (as
-- Redisson's `RSpinLock`, which publishes nothing either), so its unlock and force-unlock
-- run the shared scripts without a publish and without a channel key: their KEYS[2] is
-- nil here, and this function never reads it.
--
-- | channel | unused (nil)                                      |
-- | message | unused                                            |
-- | returns | 0: nobody was told                                |
local function publish(channel, message)
    return 0
end
