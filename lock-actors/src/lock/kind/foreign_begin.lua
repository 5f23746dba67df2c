-- Foreign unlock: release one hold of an owner this process does not count (an owner known
-- by its id, `Lock::unlock_as`): the kind's unlock, joined below and run as the function
-- `release`, then `foreign_end.lua`. The kind's `holds` function comes first. Same KEYS and
-- ARGV as the kind's unlock, but:
--
-- | ARGV[2] | the lease for the holds left, used only when the key has no expiry     |
-- | returns | nil: the owner holds nothing; {1, 0}: freed; {0, n}: n holds of the    |
-- |         | owner left (0: freed for it, other holders keep the key)               |
--
-- The holds left may be another process's, with leases this process does not know: they
-- keep the key's TTL as it is, so the kind's unlock is given the key's own PTTL to set.
local left = redis.call('pttl', KEYS[1])
if left > 0 then
    ARGV[2] = tostring(left)
end
local function release()
