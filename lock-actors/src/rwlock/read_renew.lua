-- Renew many read holds in one call (the watchdog's batch): the hash and every timeout
-- key of the holding reader.
--
-- | KEYS[2i-1] | the i-th lock's hash                                              |
-- | KEYS[2i]   | the i-th lock's name as a hash tag `{name}`                       |
-- | ARGV[1]    | lease in milliseconds                                             |
-- | ARGV[i+1]  | the owner field of the i-th reader                                |
-- | returns    | array; element i is 1 when renewed, 0 when the hold is gone       |
local renewed = {}
for i = 1, #KEYS / 2 do
    local key, tag, field = KEYS[2 * i - 1], KEYS[2 * i], ARGV[i + 1]
    local ok, count = pcall(redis.call, 'hget', key, field)
    count = ok and tonumber(count)
    if count then
        redis.call('pexpire', key, ARGV[1])
        for n = count, 1, -1 do
            redis.call('pexpire', tag .. ':' .. field .. ':rwlock_timeout:' .. n, ARGV[1])
        end
        renewed[i] = 1
    else
        renewed[i] = 0
    end
end
return renewed
