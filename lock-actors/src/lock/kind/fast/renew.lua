-- Renew many held fast locks in one call (the watchdog's batch, or one `Renew`).
--
-- | KEYS[i]   | the i-th lock's key                                               |
-- | ARGV[1]   | lease in milliseconds                                             |
-- | ARGV[i+1] | the owner field of the i-th lock                                  |
-- | returns   | array; element i is the key's PTTL after the renewal (> 0, or -1  |
-- |           | for a key without expiry) when renewed, 0 when the hold is gone   |
--
-- Never shortens the key (a `Renew` with a short lease under a watchdog-held lock would
-- otherwise let it expire before the watchdog's deadline).
local lease = tonumber(ARGV[1])
local renewed = {}
for i = 1, #KEYS do
    local ok, holder = pcall(redis.call, 'get', KEYS[i])
    if ok and holder == ARGV[i + 1] then
        local left = redis.call('pttl', KEYS[i])
        if left ~= -1 and left < lease then
            redis.call('pexpire', KEYS[i], lease)
            left = lease
        end
        renewed[i] = left
    else
        renewed[i] = 0
    end
end
return renewed
