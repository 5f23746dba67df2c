-- Renew many read holds in one call (the watchdog's batch, or one `Renew`): the hash and
-- every timeout key of the holding reader.
--
-- | KEYS[2i-1] | the i-th lock's hash                                              |
-- | KEYS[2i]   | the i-th lock's name as a hash tag `{name}`                       |
-- | ARGV[1]    | lease in milliseconds                                             |
-- | ARGV[i+1]  | the owner field of the i-th reader                                |
-- | returns    | array; element i is the hash's PTTL after the renewal (> 0, or -1 |
-- |            | for a hash without expiry) when renewed, 0 when the hold is gone  |
--
-- Nothing is shortened: the hash's TTL is shared with other readers (a reader with a
-- longer fixed lease, a Java reader), and this reader's timeout keys may belong to holds
-- with longer leases of its own. Each becomes the larger of what is left and the lease.
local lease = tonumber(ARGV[1])

local function extend(key)
    local left = redis.call('pttl', key)
    if left ~= -1 and left < lease then
        redis.call('pexpire', key, lease)
        left = lease
    end
    return left
end

local renewed = {}
for i = 1, #KEYS / 2 do
    local key, tag, field = KEYS[2 * i - 1], KEYS[2 * i], ARGV[i + 1]
    local ok, count = pcall(redis.call, 'hget', key, field)
    count = ok and tonumber(count)
    if count then
        for n = count, 1, -1 do
            extend(tag .. ':' .. field .. ':rwlock_timeout:' .. n)
        end
        renewed[i] = extend(key)
    else
        renewed[i] = 0
    end
end
return renewed
