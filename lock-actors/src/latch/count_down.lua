-- Count a latch down by one (Redisson's countDown).
--
-- | KEYS[1] | the latch's string key (its count)                                  |
-- | KEYS[2] | its channel `redisson_countdownlatch__channel__{name}`              |
-- | returns | the count after (a string: every digit kept), 0 when it reached zero   |
-- |         | (or no count was set)                                               |
--
-- At zero the key goes and `0` is published: every waiter may go. Counting down a latch
-- with no count set changes nothing and publishes nothing (Redisson's DECR-then-DEL).
-- DECR's reply reaches Lua as a double: exact near zero, where it is compared, but not
-- for every count; the count left is read back as the string Redis keeps.
count_of(KEYS[1])
local after = redis.call('decr', KEYS[1])
if after <= 0 then
    redis.call('del', KEYS[1])
end
if after == 0 then
    publish(KEYS[2], '0')
end
if after <= 0 then
    return 0
end
return redis.call('get', KEYS[1])
