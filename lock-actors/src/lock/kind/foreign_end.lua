end
-- The end of the foreign unlock (see `foreign_begin.lua`).
local answer = release()
if answer == nil then
    return nil
end
if answer == 0 then
    return {0, holds()}
end
return {1, 0}
