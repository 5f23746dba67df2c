-- Reconcile: undo one hold that this process no longer counts (an acquire whose reply was
-- lost after it ran, or an unlock whose reply was lost before it ran). This prelude runs
-- before the lock kind's `holds` function (above) and its unlock script (below), whose
-- KEYS and ARGV it shares, plus one last ARGV element:
--
-- | ARGV[#ARGV] | holds this process counts for the owner                          |
-- | returns     | -1: Redis agrees, nothing done; else what the unlock returns     |
local counted = tonumber(table.remove(ARGV))
local ok, held = pcall(holds)
if not ok or held ~= counted + 1 then
    return -1
end
