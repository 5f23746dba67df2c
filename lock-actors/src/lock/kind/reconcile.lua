-- Reconcile: undo one hold that this process no longer counts (an acquire whose reply was
-- lost after it ran, or an unlock whose reply was lost before it ran). This prelude runs
-- before the lock kind's `holds` function (above) and its unlock script (below), whose
-- KEYS and ARGV it shares, plus one last ARGV element:
--
-- | ARGV[#ARGV] | holds this process counts for the owner                          |
-- | returns     | -1: Redis agrees, nothing done; else what the unlock returns     |
--
-- The process sends it only while none of its calls for the lock is on its way, so every
-- hold Redis counts beyond `counted` is one nobody holds. Each call in doubt leaves at most
-- one such hold, and each gets its own reconcile: several doubts settle one by one.
local counted = tonumber(table.remove(ARGV))
local ok, held = pcall(holds)
if not ok or held <= counted then
    return -1
end
