-- The fair lock's stale-head rule, once: joined in front of acquire.lua, unlock.lua and
-- force_unlock.lua (and the fair reconcile), which call these functions. No KEYS or ARGV
-- of its own: the callers pass theirs.
--
-- | fair_now()                      | Redis's clock in milliseconds (Redisson uses its    |
-- |                                 | client's clock; keep the clocks in sync)            |
-- | drop_stale_heads(queue,         | pops the heads of list `queue` whose deadline in    |
-- |   deadlines, now, channel, msg) | zset `deadlines` is at or before `now` (dead        |
-- |                                 | waiters; a head with no deadline is dead too); if   |
-- |                                 | `channel` is not nil, publishes `msg` on            |
-- |                                 | `<channel>:<head>` to the first live head          |
-- | returns                         | true if it dropped any head                          |
local function fair_now()
    local clock = redis.call('time')
    return tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
end

local function drop_stale_heads(queue, deadlines, now, channel, msg)
    local dropped = false
    while true do
        local head = redis.call('lindex', queue, 0)
        if not head then
            return dropped
        end
        local deadline = tonumber(redis.call('zscore', deadlines, head))
        if deadline and deadline > now then
            if channel then
                publish(channel .. ':' .. head, msg)
            end
            return dropped
        end
        redis.call('lpop', queue)
        redis.call('zrem', deadlines, head)
        dropped = true
    end
end
