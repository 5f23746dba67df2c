-- Set the lease of permits of a permit-expirable semaphore to ARGV[1] from now: the renewal of
-- held permits, and a holder's lease update (Redisson's `updateLeaseTime` sets it the same way).
--
-- | KEYS[1] | the zset `{name}:timeout`: permit id → expiry                       |
-- | ARGV[1] | the lease in milliseconds, from now                                |
-- | ARGV[2…] | the permit ids                                                     |
-- | returns | one integer per id: 1 renewed; 0 gone or already expired (not renewed) |
--
-- An expired permit is not brought back: another acquire may already count on it.
local now = now_ms()
local expiry = now + tonumber(ARGV[1])
local renewed = {}
for i = 2, #ARGV do
    local current = redis.call('zscore', KEYS[1], ARGV[i])
    if current and tonumber(current) > now then
        redis.call('zadd', KEYS[1], 'XX', expiry, ARGV[i])
        renewed[i - 1] = 1
    else
        renewed[i - 1] = 0
    end
end
return renewed
