-- Undo one hold that this process no longer counts: an acquire whose reply was lost after
-- it ran, or an unlock whose reply was lost before it ran.
--
-- | KEYS[1] | the lock's hash                                                      |
-- | KEYS[2] | the unlock channel                                                   |
-- | ARGV[1] | holds this process counts for the owner                              |
-- | ARGV[2] | lease in milliseconds, set again while holds remain                  |
-- | ARGV[3] | owner field `uuid:owner`                                             |
-- | ARGV[4] | the message to publish when freed (`0`)                              |
-- | returns | 1: one hold undone; 0: Redis agrees with this process, nothing to do |
local ok, held = pcall(redis.call, 'hget', KEYS[1], ARGV[3])
if not ok then
    return 0
end
local holds = tonumber(held or '0')
if holds ~= tonumber(ARGV[1]) + 1 then
    return 0
end
if holds > 1 then
    redis.call('hincrby', KEYS[1], ARGV[3], -1)
    redis.call('pexpire', KEYS[1], ARGV[2])
    return 1
end
redis.call('del', KEYS[1])
redis.call('publish', KEYS[2], ARGV[4])
return 1
