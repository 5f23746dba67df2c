-- Take permits from a permit-expirable semaphore (Redisson's RPermitExpirableSemaphore layout).
--
-- | KEYS[1] | the semaphore's string key: how many permits are available          |
-- | KEYS[2] | its channel `redisson_sc:{name}`                                    |
-- | KEYS[3] | the zset `{name}:timeout`: permit id → expiry (ms since the epoch)  |
-- | KEYS[4] | this acquire's marker `{name}:semaphore_acquire:<request id>`        |
-- | ARGV[1] | the lease in milliseconds                                          |
-- | ARGV[2…] | one new permit id per permit wanted (16 raw bytes, as Redisson)    |
-- | returns | {1, available after}: taken, ids recorded with expiry now + lease; |
-- |         | {0, available, ms until the next permit expires or -1}: not enough |
-- |         | {-1, available}: this request was settled already, nothing changed |
-- |         | {-2, 0}: the semaphore has no key (its permits were never set)     |
--
-- Expired permits go back to the count first (and the count is published), so a dead
-- holder's permits return on the next acquire. Redisson's lease-less permits carry the
-- score 922337203685477 and never expire. The marker exists only once the acquire was
-- settled (`expirable_settle.lua`, after its reply was lost): a late copy takes nothing.
local never = 922337203685477
local available = permits_of(KEYS[1])
if redis.call('exists', KEYS[4]) == 1 then
    return {-1, available}
end
local now = now_ms()
available = reclaim(KEYS[1], KEYS[3], KEYS[2], available, now)
local wanted = #ARGV - 1
if available >= wanted then
    redis.call('decrby', KEYS[1], wanted)
    local expiry = now + tonumber(ARGV[1])
    for i = 2, #ARGV do
        redis.call('zadd', KEYS[3], expiry, ARGV[i])
    end
    return {1, available - wanted}
end
if redis.call('exists', KEYS[1]) == 0 then
    return {-2, 0}
end
-- The bound is written as text: Lua would print `never` with 14 significant digits, a
-- number above it, and count a never-expiring permit as the next to expire.
local upcoming = redis.call('zrangebyscore', KEYS[3], '(' .. now, '(922337203685477', 'WITHSCORES', 'LIMIT', 0, 1)
if upcoming[2] then
    return {0, available, tonumber(upcoming[2]) - now}
end
return {0, available, -1}
