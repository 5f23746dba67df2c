-- How many holds Redis records for the owner in ARGV[3]: 1 if it holds the fast lock.
local function holds()
    if redis.call('get', KEYS[1]) == ARGV[3] then
        return 1
    end
    return 0
end
