-- Does nothing. Called with one key after the ACL refused a script call that named
-- several, to find which key the user may not touch: Redis checks a call's keys against
-- the user's key patterns before it runs the script, and says only "one of the keys".
--
-- | KEYS[1] | the key to check |
-- | returns | 0                |
return 0
