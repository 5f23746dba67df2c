-- Delete a fair lock whoever holds it, and wake the next live waiter in line on its own
-- channel (a fair lock's waiters do not listen on the lock's channel).
-- Publishes with `publish_command` (`publish` or `spublish`): the client puts the line
-- that sets it first (classic or sharded pub/sub, see connection.rs).
--
-- | KEYS[1] | the lock's hash                                                        |
-- | KEYS[2] | the lock's channel; waiter w listens on `<KEYS[2]>:w`                 |
-- | KEYS[3] | the queue `redisson_lock_queue:{name}`                                |
-- | KEYS[4] | the deadlines `redisson_lock_timeout:{name}`                          |
-- | ARGV[1] | the message to publish (`0`)                                           |
-- | returns | 1: a lock was deleted; 0: there was none                               |
local kind = redis.call('type', KEYS[1])['ok']
if kind == 'none' then
    return 0
end
if kind ~= 'hash' then
    return redis.error_reply('WRONGTYPE key is not a lock of this kind')
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
