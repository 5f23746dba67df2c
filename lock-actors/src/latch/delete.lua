-- Delete a latch (its count): every waiter may go.
--
-- | KEYS[1] | the latch's string key (its count)                                  |
-- | KEYS[2] | its channel `redisson_countdownlatch__channel__{name}`              |
-- | returns | 1: deleted, and `0` (zero reached) published; 0: no count was set    |
--
-- Redisson's delete publishes `1` (new count), which leaves its untimed waiters asleep
-- on a latch that is open; `0` wakes them, and they find the count at zero.
count_of(KEYS[1])
if redis.call('del', KEYS[1]) == 1 then
    publish(KEYS[2], '0')
    return 1
end
return 0
