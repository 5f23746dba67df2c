-- Take (or re-enter) a fair lock, or wait in its queue: grants go in queue order, across
-- every process.
--
-- | KEYS[1] | the lock's hash; field = owner, value = hold count                    |
-- | KEYS[2] | the queue `redisson_lock_queue:{name}` (owner fields, oldest first)   |
-- | KEYS[3] | the deadlines `redisson_lock_timeout:{name}` (owner → ms it ages out) |
-- | ARGV[1] | lease in milliseconds                                                  |
-- | ARGV[2] | owner field `uuid:owner`                                               |
-- | ARGV[3] | how long a waiter may go without calling again before it is skipped   |
-- | returns | nil: acquired; integer: ms to wait at most before calling again        |
--
-- Every call of a waiter is its sign of life: its deadline moves to now + ARGV[3]. A
-- waiter at the head whose deadline passed (it died, or gave up without saying so) is
-- dropped, so a queue never sticks. Time comes from Redis, not from the callers' clocks.
local clock = redis.call('time')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
while true do
    local head = redis.call('lindex', KEYS[2], 0)
    if not head then
        break
    end
    local deadline = tonumber(redis.call('zscore', KEYS[3], head))
    if deadline and deadline > now then
        break
    end
    redis.call('lpop', KEYS[2])
    redis.call('zrem', KEYS[3], head)
end
if redis.call('exists', KEYS[1]) == 0 then
    local head = redis.call('lindex', KEYS[2], 0)
    if not head or head == ARGV[2] then
        if head then
            redis.call('lpop', KEYS[2])
        end
        redis.call('zrem', KEYS[3], ARGV[2])
        redis.call('hset', KEYS[1], ARGV[2], 1)
        redis.call('pexpire', KEYS[1], ARGV[1])
        return nil
    end
elseif redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return nil
end
-- Wait in line: join it at the back, or stay where we are with a fresh deadline.
local patience = tonumber(ARGV[3])
if redis.call('zadd', KEYS[3], now + patience, ARGV[2]) == 1 then
    redis.call('rpush', KEYS[2], ARGV[2]) -- new in the deadlines: new in line
end
-- Both keys live as long as the newest deadline, so an abandoned queue cleans itself up.
redis.call('pexpire', KEYS[2], patience)
redis.call('pexpire', KEYS[3], patience)
local ttl = redis.call('pttl', KEYS[1])
if ttl < 0 then
    -- Free, but an earlier waiter goes first: it has until its deadline to take it.
    local head = redis.call('lindex', KEYS[2], 0)
    ttl = math.max(1, tonumber(redis.call('zscore', KEYS[3], head)) - now)
end
return ttl
