-- Release one read hold; when no hold is left, delete the lock and wake one waiter (the
-- waiters are writers: readers never wait for readers).
-- The timeout key that goes is the reader's last one, whichever hold was let go (the keys
-- are numbered by count, as Redisson's): its last remaining key is kept at least as long
-- as the reader's remaining holds need (ARGV[2]), so a longer lease let go early never
-- leaves them only a shorter hold's key.
-- Under a write hold (the writer's own read holds) the hash's TTL is never shortened: it
-- is the writer's lease. Redisson's read unlock cuts it to the longest read hold left; a
-- read unlock in write mode only ever comes from the writer's own owner, so a waiter (Java
-- or Rust) only sees a PTTL as long as the writer's hold really lasts.
-- Publishes with `publish_command` (`publish` or `spublish`): the client puts the line
-- that sets it first (classic or sharded pub/sub, see connection.rs).
--
-- | KEYS[1] | the lock's hash                                                       |
-- | KEYS[2] | the read-write channel `redisson_rwlock:{name}`                      |
-- | KEYS[3] | this reader's timeout prefix `{name}:uuid:owner:rwlock_timeout`       |
-- | KEYS[4] | the name as a hash tag `{name}` (start of every reader's prefix)      |
-- | ARGV[1] | the message to publish when freed (`0`: wakes one, as Redisson's)     |
-- | ARGV[2] | the longest lease the reader's remaining holds have left (ms)        |
-- | ARGV[3] | owner field `uuid:owner`                                              |
-- | returns | nil: not a reader; 0: others still hold it; 1: freed                  |
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false or redis.call('hexists', KEYS[1], ARGV[3]) == 0 then
    return nil
end
local holds = redis.call('hincrby', KEYS[1], ARGV[3], -1)
if holds == 0 then
    redis.call('hdel', KEYS[1], ARGV[3])
end
redis.call('del', KEYS[3] .. ':' .. (holds + 1))
if holds > 0 then
    local last = KEYS[3] .. ':' .. holds
    local left = redis.call('pttl', last)
    if left ~= -1 and left < tonumber(ARGV[2]) then
        redis.call('set', last, 1, 'PX', ARGV[2])
    end
end
if redis.call('hlen', KEYS[1]) > 1 then
    -- Others hold it: the hash lives as long as the longest read hold left.
    local longest = -3
    for _, field in ipairs(redis.call('hkeys', KEYS[1])) do
        local count = tonumber(redis.call('hget', KEYS[1], field))
        if count then
            for n = count, 1, -1 do
                local key = KEYS[4] .. ':' .. field .. ':rwlock_timeout:' .. n
                longest = math.max(longest, redis.call('pttl', key))
            end
        end
    end
    if longest > 0 then
        if mode == 'write' then
            longest = math.max(longest, redis.call('pttl', KEYS[1]))
        end
        redis.call('pexpire', KEYS[1], longest)
        return 0
    end
    if mode == 'write' then
        return 0
    end
end
redis.call('del', KEYS[1])
publish(KEYS[2], ARGV[1])
return 1
