-- Renew many held locks in one call (the watchdog's batch, or one `Renew`).
--
-- | KEYS[i]   | the i-th lock's hash                                              |
-- | ARGV[1]   | lease in milliseconds                                             |
-- | ARGV[i+1] | the owner field of the i-th lock                                  |
-- | returns   | array; element i is the key's PTTL after the renewal (> 0, or -1  |
-- |           | for a key without expiry) when renewed, 0 when the hold is gone   |
--
-- A renewal never shortens the key: its TTL is shared by every hold on it (the owner's
-- holds with other leases), so it becomes the larger of what is left and the lease.
-- A key that now holds non-lock data counts as gone (pcall keeps the batch going).
local lease = tonumber(ARGV[1])
local renewed = {}
for i = 1, #KEYS do
    local held = redis.pcall('hexists', KEYS[i], ARGV[i + 1])
    if held == 1 then
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
