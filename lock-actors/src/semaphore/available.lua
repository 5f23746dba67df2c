-- Read a semaphore's available permits.
--
-- | KEYS[1] | the semaphore's string key                                          |
-- | KEYS[2] | its channel `redisson_sc:{name}`                                    |
-- | KEYS[3] | permit-expirable only: the zset `{name}:timeout` of permit → expiry |
-- | returns | the available permits (0 when never set)                           |
--
-- A permit-expirable semaphore first takes back expired permits (as Redisson does).
local available = permits_of(KEYS[1])
if #KEYS == 3 then
    available = reclaim(KEYS[1], KEYS[3], KEYS[2], available, now_ms())
end
return available
