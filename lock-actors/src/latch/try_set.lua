-- Set a latch's count only if none is set (Redisson's trySetCount).
--
-- | KEYS[1] | the latch's string key (its count)                                  |
-- | KEYS[2] | its channel `redisson_countdownlatch__channel__{name}`              |
-- | ARGV[1] | the count, at least 1                                               |
-- | returns | 1: set, and `1` (new count) published; 0: a count is set already    |
if count_of(KEYS[1]) then
    return 0
end
redis.call('set', KEYS[1], ARGV[1])
publish(KEYS[2], '1')
return 1
