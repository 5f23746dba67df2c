-- Release one hold of a fair lock; when it is freed, wake only the next waiter in line,
-- on that waiter's own channel.
-- Publishes with `publish_command` (`publish` or `spublish`): the client puts the line
-- that sets it first (classic or sharded pub/sub, see connection.rs). `fair_now` and
-- `drop_stale_heads` come from stale.lua, joined in front.
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
-- Dead heads go; the first live one is woken on its own channel.
drop_stale_heads(KEYS[3], KEYS[4], fair_now(), KEYS[2], ARGV[1])
return 1
