-- Leave a fair lock's queue (a waiter that timed out or was cancelled); if the lock is
-- free, wake whoever is first in line now.
-- Publishes with `publish_command` (`publish` or `spublish`): the client puts the line
-- that sets it first (classic or sharded pub/sub, see connection.rs).
--
-- | KEYS[1] | the lock's hash                                                        |
-- | KEYS[2] | the lock's channel; waiter w listens on `<KEYS[2]>:w`                 |
-- | KEYS[3] | the queue `redisson_lock_queue:{name}`                                |
-- | KEYS[4] | the deadlines `redisson_lock_timeout:{name}`                          |
-- | ARGV[1] | the message to publish (`0`)                                           |
-- | ARGV[2] | owner field `uuid:owner` of the waiter leaving                        |
-- | ARGV[3] | the wait allowance per waiter (as in acquire.lua)                      |
-- | returns | 1: it was in the queue; 0: it was not                                  |
--
-- As Redisson's waiters do when they give up: everyone behind the leaver moves up one
-- place, so their deadlines lose one allowance.
local queue = redis.call('lrange', KEYS[3], 0, -1)
local behind = false
for _, waiter in ipairs(queue) do
    if behind then
        redis.call('zincrby', KEYS[4], -tonumber(ARGV[3]), waiter)
    elseif waiter == ARGV[2] then
        behind = true
    end
end
redis.call('zrem', KEYS[4], ARGV[2])
local removed = redis.call('lrem', KEYS[3], 0, ARGV[2])
if removed > 0 and redis.call('exists', KEYS[1]) == 0 then
    local head = redis.call('lindex', KEYS[3], 0)
    if head then
        publish(KEYS[2] .. ':' .. head, ARGV[1])
    end
end
return math.min(removed, 1)
