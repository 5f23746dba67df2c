-- Renew many held locks in one call (the watchdog's batch).
--
-- | KEYS[i]   | the i-th lock's hash                                          |
-- | ARGV[1]   | lease in milliseconds                                         |
-- | ARGV[i+1] | the owner field of the i-th lock                              |
-- | returns   | array; element i is 1 when renewed, 0 when the hold is gone   |
--
-- A key that now holds non-lock data counts as gone (pcall keeps the batch going).
local renewed = {}
for i = 1, #KEYS do
    local held = redis.pcall('hexists', KEYS[i], ARGV[i + 1])
    if held == 1 then
        redis.call('pexpire', KEYS[i], ARGV[1])
        renewed[i] = 1
    else
        renewed[i] = 0
    end
end
return renewed
