-- Take (or re-enter) a fair lock, or wait in its queue: grants go in queue order, across
-- every process, Redisson's `RFairLock` waiters included.
--
-- | KEYS[1] | the lock's hash; field = owner, value = hold count                    |
-- | KEYS[2] | the queue `redisson_lock_queue:{name}` (owner fields, oldest first)   |
-- | KEYS[3] | the deadlines `redisson_lock_timeout:{name}` (owner → ms it ages out) |
-- | KEYS[4] | the lock's channel; waiter w listens on `<KEYS[4]>:w`                 |
-- | ARGV[1] | lease in milliseconds                                                  |
-- | ARGV[2] | owner field `uuid:owner`                                               |
-- | ARGV[3] | the wait allowance per waiter (Redisson's `fairLockWaitTimeout`)       |
-- | ARGV[4] | the message that wakes a waiter (`0`)                                  |
-- | returns | status OK: acquired, the owner's first hold; nil: re-entered;         |
-- |         | integer: ms to wait at most before calling again                      |
-- Publishes with `publish_command` (`publish` or `spublish`): the client puts the line
-- that sets it first (classic or sharded pub/sub, see connection.rs).
--
-- Redisson's rule, so one queue serves both languages: a waiter joins with the deadline
-- (the previous waiter's deadline, or the lock's PTTL when first) + ARGV[3] + now, and never
-- moves it; every grant takes ARGV[3] off every deadline left; heads whose deadline passed
-- (dead waiters) are dropped. The keys carry no TTL: they vanish as the queue empties.
-- Time comes from Redis (Redisson uses its client's clock; keep the clocks in sync).
-- `fair_now` and `drop_stale_heads` come from stale.lua, joined in front.
--
-- Where this call drops dead heads and the lock is free, it wakes the new head on its own
-- channel: a Redisson 3.x waiter may sleep until its own deadline, and would be dropped in
-- turn by whoever calls first after it.
local now = fair_now()
local allowance = tonumber(ARGV[3])
local dropped = drop_stale_heads(KEYS[2], KEYS[3], now, nil, nil)
if redis.call('exists', KEYS[1]) == 0 then
    local head = redis.call('lindex', KEYS[2], 0)
    if head and head ~= ARGV[2] and dropped then
        publish(KEYS[4] .. ':' .. head, ARGV[4])
    end
    if not head or head == ARGV[2] then
        if head then
            redis.call('lpop', KEYS[2])
        end
        redis.call('zrem', KEYS[3], ARGV[2])
        -- Everyone behind moves up one place: one allowance less to wait.
        for _, waiter in ipairs(redis.call('zrange', KEYS[3], 0, -1)) do
            redis.call('zincrby', KEYS[3], -allowance, waiter)
        end
        redis.call('hset', KEYS[1], ARGV[2], 1)
        redis.call('pexpire', KEYS[1], ARGV[1])
        -- The first hold says so: an owner that counted holds Redis had forgotten lost them.
        return redis.status_reply('OK')
    end
elseif redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    -- A re-entry never shortens the TTL the owner's other holds share.
    redis.call('pexpire', KEYS[1], math.max(redis.call('pttl', KEYS[1]), tonumber(ARGV[1])))
    return nil
end
-- Wait in line: join at the back, or keep the place (and deadline) we have.
if not redis.call('zscore', KEYS[3], ARGV[2]) then
    local last = redis.call('lindex', KEYS[2], -1)
    local last_deadline = last and tonumber(redis.call('zscore', KEYS[3], last))
    local ahead
    if last_deadline then
        ahead = last_deadline - now
    else
        ahead = redis.call('pttl', KEYS[1])
    end
    redis.call('zadd', KEYS[3], ahead + allowance + now, ARGV[2])
    redis.call('rpush', KEYS[2], ARGV[2])
end
local ttl = redis.call('pttl', KEYS[1])
if ttl < 0 then
    -- Free, but an earlier waiter goes first: it has until its deadline to take it.
    local head = redis.call('lindex', KEYS[2], 0)
    ttl = tonumber(redis.call('zscore', KEYS[3], head)) - now
end
return math.max(1, ttl)
