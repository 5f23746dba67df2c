-- Renew many held fast locks in one call (the watchdog's batch).
--
-- | KEYS[i]   | the i-th lock's key                                           |
-- | ARGV[1]   | lease in milliseconds                                         |
-- | ARGV[i+1] | the owner field of the i-th lock                              |
-- | returns   | array; element i is 1 when renewed, 0 when the hold is gone   |
local renewed = {}
for i = 1, #KEYS do
    local ok, holder = pcall(redis.call, 'get', KEYS[i])
    if ok and holder == ARGV[i + 1] then
        redis.call('pexpire', KEYS[i], ARGV[1])
        renewed[i] = 1
    else
        renewed[i] = 0
    end
end
return renewed
