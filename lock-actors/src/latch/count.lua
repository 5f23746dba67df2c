-- Read a latch's count (Redisson's getCount).
--
-- | KEYS[1] | the latch's string key (its count)                                  |
-- | returns | the count as stored (a string: every digit kept), or 0 when none    |
local value = count_of(KEYS[1])
if value == false then
    return 0
end
return value
