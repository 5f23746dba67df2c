-- Release one hold of a fair lock; when it is freed, wake only the next waiter in line,
-- on that waiter's own channel.
-- Publishes with `publish_command` (`publish` or `spublish`): the client puts the line
-- that sets it first (classic or sharded pub/sub, see connection.rs).
--
-- | KEYS[1] | the lock's hash                                                        |
-- | KEYS[2] | the lock's channel `redisson_lock__channel:{name}`; waiter w listens  |
-- |         | on `<KEYS[2]>:w`                                                       |
-- | KEYS[3] | the queue `redisson_lock_queue:{name}`                                |
-- | KEYS[4] | the deadlines `redisson_lock_timeout:{name}`                          |
-- | ARGV[1] | the message to publish when freed (`0`)                                |
-- | ARGV[2] | lease in milliseconds, set again while holds remain                    |
-- | ARGV[3] | owner field `uuid:owner`                                               |
-- | returns | nil: not the owner; 0: still held (holds remain); 1: freed             |
if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then
    return nil
end
local holds = redis.call('hincrby', KEYS[1], ARGV[3], -1)
if holds > 0 then
    redis.call('pexpire', KEYS[1], ARGV[2])
    return 0
end
redis.call('del', KEYS[1])
local clock = redis.call('time')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
while true do
    local head = redis.call('lindex', KEYS[3], 0)
    if not head then
        break
    end
    local deadline = tonumber(redis.call('zscore', KEYS[4], head))
    if deadline and deadline > now then
        redis.call(publish_command, KEYS[2] .. ':' .. head, ARGV[1])
        break
    end
    redis.call('lpop', KEYS[3])
    redis.call('zrem', KEYS[4], head)
end
return 1
