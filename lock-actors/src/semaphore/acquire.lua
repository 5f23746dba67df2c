-- Take permits from a semaphore (Redisson's RSemaphore layout), leaving a receipt that
-- settles the acquire if its reply is lost (settle.lua).
--
-- | KEYS[1] | the semaphore's string key: how many permits are available          |
-- | KEYS[2] | this acquire's receipt `{name}:semaphore_acquire:<request id>`        |
-- | ARGV[1] | permits wanted (at least 1)                                          |
-- | ARGV[2] | how long the receipt lives, in ms                                    |
-- | returns | {1, available after}: taken; {0, available}: not enough, nothing changed; |
-- |         | {-1, available}: this request was settled already, nothing changed; |
-- |         | {-2, 0}: the semaphore has no key (its permits were never set)      |
--
-- A missing key has no permits (set them first). Any other value is refused (WRONGTYPE).
-- The receipt says `taken`; a settlement that came first left `settled`, and a late copy
-- of the request (delivered after its settlement) must not take anything.
local available = permits_of(KEYS[1])
if redis.call('exists', KEYS[2]) == 1 then
    return {-1, available}
end
local wanted = tonumber(ARGV[1])
if available >= wanted then
    redis.call('set', KEYS[2], 'taken', 'px', ARGV[2])
    return {1, redis.call('decrby', KEYS[1], wanted)}
end
if redis.call('exists', KEYS[1]) == 0 then
    return {-2, 0}
end
return {0, available}
