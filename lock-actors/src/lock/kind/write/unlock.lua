-- Release one write hold. The last one frees the lock (waking every waiter), or, when the
-- same owner also took read holds, turns it into a read lock (waking every waiter).
-- Publishes with `publish_command` (`publish` or `spublish`): the client puts the line
-- that sets it first (classic or sharded pub/sub, see connection.rs).
--
-- | KEYS[1] | the lock's hash                                                       |
-- | KEYS[2] | the read-write channel `redisson_rwlock:{name}`                      |
-- | KEYS[3] | the name as a hash tag `{name}` (start of every reader's prefix)      |
-- | ARGV[1] | the message to publish when freed (`1`: wakes all, as Redisson's)     |
-- | ARGV[2] | the longest lease the writer's remaining write holds have left (ms)   |
-- | ARGV[3] | writer field `uuid:owner:write`                                       |
-- | ARGV[4] | the message to publish when readers remain (`1`)                      |
-- | returns | nil: not the writer; 0: still held (holds remain); 1: released        |
--
-- The hash's TTL is shared with the writer's own read holds (each with a timeout key of its
-- own lease): it is never set below the longest of them.
local function longest_read_hold()
    local longest = -3
    for _, field in ipairs(redis.call('hkeys', KEYS[1])) do
        local count = tonumber(redis.call('hget', KEYS[1], field))
        if count and string.sub(field, -6) ~= ':write' then
            for n = count, 1, -1 do
                local key = KEYS[3] .. ':' .. field .. ':rwlock_timeout:' .. n
                longest = math.max(longest, redis.call('pttl', key))
            end
        end
    end
    return longest
end

if redis.call('hget', KEYS[1], 'mode') ~= 'write' or redis.call('hexists', KEYS[1], ARGV[3]) == 0 then
    return nil
end
local holds = redis.call('hincrby', KEYS[1], ARGV[3], -1)
if holds > 0 then
    redis.call('pexpire', KEYS[1], math.max(tonumber(ARGV[2]), longest_read_hold()))
    return 0
end
redis.call('hdel', KEYS[1], ARGV[3])
if redis.call('hlen', KEYS[1]) > 1 then
    local longest = longest_read_hold()
    if longest > 0 then
        -- The writer's read holds remain: a read lock that lives as long as the longest.
        redis.call('hset', KEYS[1], 'mode', 'read')
        redis.call('pexpire', KEYS[1], longest)
        publish(KEYS[2], ARGV[4])
        return 1
    end
end
redis.call('del', KEYS[1])
publish(KEYS[2], ARGV[1])
return 1
