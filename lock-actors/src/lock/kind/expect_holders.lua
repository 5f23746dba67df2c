-- Refuse a force-unlock unless the lock is held by exactly the holders its caller saw (an
-- operator's confirmation is about those holders; one who took the lock since is left
-- alone). Joined in front of a kind's force-unlock script, whose KEYS and ARGV it shares;
-- it takes its own arguments off the end of ARGV:
--
-- | ARGV[#ARGV]        | n: how many holders the caller saw                              |
-- | the n ARGV before  | their fields (a hash's fields but `mode`; a fast lock's value)  |
-- | returns            | -1: the holders differ, nothing done; else the force-unlock's   |
local seen_count = tonumber(table.remove(ARGV))
local seen = {}
for _ = 1, seen_count do
    seen[table.remove(ARGV)] = true
end
local holding = {}
local stored = redis.call('type', KEYS[1])['ok']
if stored == 'hash' then
    for _, field in ipairs(redis.call('hkeys', KEYS[1])) do
        if field ~= 'mode' then
            table.insert(holding, field)
        end
    end
elseif stored == 'string' then
    table.insert(holding, redis.call('get', KEYS[1]))
end
local same = #holding == seen_count
for _, field in ipairs(holding) do
    if not seen[field] then
        same = false
    end
end
if not same then
    return -1
end
