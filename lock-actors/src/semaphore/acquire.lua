-- Take permits from a semaphore (Redisson's RSemaphore layout).
--
-- | KEYS[1] | the semaphore's string key: how many permits are available          |
-- | ARGV[1] | permits wanted (at least 1)                                          |
-- | returns | {1, available after}: taken; {0, available}: not enough, nothing changed |
--
-- A missing key has no permits (set them first). Any other value is refused (WRONGTYPE).
local available = permits_of(KEYS[1])
local wanted = tonumber(ARGV[1])
if available >= wanted then
    return {1, redis.call('decrby', KEYS[1], wanted)}
end
return {0, available}
