-- Delete a fair lock whoever holds it, and wake the next live waiter in line on its own
-- channel (a fair lock's waiters do not listen on the lock's channel).
-- Publishes with `publish_command` (`publish` or `spublish`): the client puts the line
-- that sets it first (classic or sharded pub/sub, see connection.rs). `fair_now` and
-- `drop_stale_heads` come from stale.lua, joined in front.
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
-- Dead heads go; the first live one is woken on its own channel.
drop_stale_heads(KEYS[3], KEYS[4], fair_now(), KEYS[2], ARGV[1])
return 1
