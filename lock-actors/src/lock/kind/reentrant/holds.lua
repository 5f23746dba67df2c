-- How many holds Redis records for the owner field in ARGV[3] of the hash KEYS[1].
local function holds()
    return tonumber(redis.call('hget', KEYS[1], ARGV[3]) or '0')
end
