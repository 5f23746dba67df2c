-- The publish of every publishing script (prepended after the line that sets
-- `publish_command` to `publish` or `spublish`).
--
-- | channel | the channel to publish on                     |
-- | message | the message                                   |
-- | returns | the number of receivers, as PUBLISH does      |
--
-- A publish the ACL user may not make fails the script with
-- `NOPERM <command>\t<channel>\t<the server's text>`: Redis's own error names neither
-- the command nor the channel (the client reads the three fields back). Redis 7 says
-- `NOPERM ...` or `... can't publish to the channel ...`; Valkey 8 `ACL failure in script: ...`.
local function publish(channel, message)
    local reply = redis.pcall(publish_command, channel, message)
    if type(reply) == 'table' and reply.err then
        local refused = string.find(reply.err, 'NOPERM', 1, true)
            or string.find(reply.err, "can't", 1, true)
            or string.find(reply.err, 'ACL failure', 1, true)
        if refused then
            error({ err = 'NOPERM ' .. publish_command .. '\t' .. channel .. '\t' .. reply.err })
        end
        error(reply)
    end
    return reply
end
