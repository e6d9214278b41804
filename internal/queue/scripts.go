package queue

import "github.com/redis/go-redis/v9"

// luaLib is prepended to every script. Redis' Lua allows only a few thousand
// values on the C stack, so every variadic command goes through bulk, which
// unpacks at most chunk values at a time.
const luaLib = `
local chunk = 1000

-- wrong_type checks, before the script writes anything, that each KEYS[i]
-- is absent or of type want[i], and returns an error reply naming the first
-- that is not (Queue.eval moves it aside): a WRONGTYPE half-way through a
-- script would leave its first writes done and the rest not.
local function wrong_type(...)
  local want = {...}
  for i = 1, #want do
    local t = redis.call('TYPE', KEYS[i])['ok']
    if t ~= 'none' and t ~= want[i] then
      return redis.error_reply('NOTIFYD_WRONGTYPE ' .. i .. ' ' .. t .. ' ' .. want[i])
    end
  end
  return nil
end

local function bulk(cmd, key, list)
  local n = #list
  for i = 1, n, chunk do
    redis.call(cmd, key, unpack(list, i, math.min(i + chunk - 1, n)))
  end
end

-- remove_ids deletes each id from the list at key and returns the ids it
-- found, each once, in the order of ids. Few ids against a long list: one
-- LREM each with count rm (0: every copy, for the dead list, which may hold
-- an id twice; -1: the oldest copy only, for a processing list, where an
-- id is at most once — push adds only what SADD members added, and an id
-- leaves members only by leaving its list — so the LREM stops where it
-- finds it instead of scanning the rest of the list: an instance works a
-- long backup list off oldest first, from the end LREM -1 starts at). A
-- copy that a restore or another program put there besides is left to the
-- orphan check, which claims it, finds it settled and acks it again. Many
-- ids: one pass over the list and a rewrite, O(len) in total, every copy.
local function remove_ids(key, ids, rm)
  local found = {}
  if #ids == 0 then return found end
  local len = redis.call('LLEN', key)
  if len == 0 then return found end
  if len <= 32 * #ids then
    local want = {}
    for _, id in ipairs(ids) do want[id] = true end
    local keep, hit = {}, {}
    for _, v in ipairs(redis.call('LRANGE', key, 0, -1)) do
      if want[v] then hit[v] = true else keep[#keep + 1] = v end
    end
    for _, id in ipairs(ids) do
      if hit[id] then
        hit[id] = nil
        found[#found + 1] = id
      end
    end
    if #found > 0 then
      redis.call('DEL', key)
      bulk('RPUSH', key, keep)
    end
  else
    local seen = {}
    for _, id in ipairs(ids) do
      if not seen[id] then
        seen[id] = true
        if redis.call('LREM', key, rm, id) > 0 then found[#found + 1] = id end
      end
    end
  end
  return found
end

-- place sends ids to ready (due '0') or to delayed (due = score in ms).
local function place(ready, delayed, ids, due)
  local now, later = {}, {}
  for _, id in ipairs(ids) do
    local d = due[id]
    if d == '0' then
      now[#now + 1] = id
    else
      later[#later + 1] = d
      later[#later + 1] = id
    end
  end
  bulk('LPUSH', ready, now)
  bulk('ZADD', delayed, later) -- chunk is even, so score/member pairs stay whole
end

-- pairs_of reads ARGV from offset as id, due pairs; the first due of a
-- duplicated id wins.
local function pairs_of(from)
  local ids, due = {}, {}
  for i = from, #ARGV, 2 do
    local id = ARGV[i]
    if due[id] == nil then
      ids[#ids + 1] = id
      due[id] = ARGV[i + 1]
    end
  end
  return ids, due
end
`

// Every script lists every key it touches in KEYS, all of one channel and so
// of one hash slot. The comments give KEYS and ARGV.

// scriptPush: KEYS members, ready, delayed; ARGV horizon ms, then id, due,
// id, due, ... (due '0' = ready now, else the due time in ms). Returns how
// many ids were new to members. An id already a member is left where it
// is (a retry keeps its backoff), unless its delayed score lies past the
// horizon (Queue.Push): such a score is no backoff this package wrote but a
// corruption (+inf, a clock days ahead, a restore), Promote would never reach
// it, and as a member no push could queue it again; it is placed anew as the
// push says.
var scriptPush = redis.NewScript(luaLib + `
local bad = wrong_type('set', 'list', 'zset')
if bad then return bad end
local ids, due = pairs_of(2)
local fresh, known = {}, {}
for i = 1, #ids, chunk do
  local j = math.min(i + chunk - 1, #ids)
  local m = redis.call('SMISMEMBER', KEYS[1], unpack(ids, i, j))
  for k = 1, #m do
    if m[k] == 0 then fresh[#fresh + 1] = ids[i + k - 1] else known[#known + 1] = ids[i + k - 1] end
  end
end
bulk('SADD', KEYS[1], fresh)
place(KEYS[2], KEYS[3], fresh, due)
if #known > 0 then
  local horizon, far = tonumber(ARGV[1]), {}
  for i = 1, #known, chunk do
    local j = math.min(i + chunk - 1, #known)
    local s = redis.call('ZMSCORE', KEYS[3], unpack(known, i, j))
    for k = 1, #s do
      if s[k] and tonumber(s[k]) > horizon then far[#far + 1] = known[i + k - 1] end
    end
  end
  bulk('ZREM', KEYS[3], far)
  place(KEYS[2], KEYS[3], far, due)
end
return #fresh
`)

// scriptFetch: KEYS ready, processing, instances; ARGV max, instance, now ms,
// check lease ('1'/'0'). Moves up to max of the oldest ready ids into
// processing and returns them oldest first, or -1 when the lease is missing
// or expired.
var scriptFetch = redis.NewScript(luaLib + `
local bad = wrong_type('list', 'list', 'zset')
if bad then return bad end
if ARGV[4] == '1' then
  local s = redis.call('ZSCORE', KEYS[3], ARGV[2])
  if not s or tonumber(s) <= tonumber(ARGV[3]) then return -1 end
end
local n = tonumber(ARGV[1])
local got = redis.call('LRANGE', KEYS[1], -n, -1)
local k = #got
if k == 0 then return got end
redis.call('LTRIM', KEYS[1], 0, -k - 1)
local out = {}
for i = k, 1, -1 do out[#out + 1] = got[i] end
bulk('LPUSH', KEYS[2], out)
return out
`)

// scriptAck: KEYS processing, members; ARGV ids. Only ids found in this
// instance's processing list leave members, so a late ack from an instance
// that lost its lease cannot orphan an id another instance now holds.
var scriptAck = redis.NewScript(luaLib + `
local bad = wrong_type('list', 'set')
if bad then return bad end
local found = remove_ids(KEYS[1], ARGV, -1)
bulk('SREM', KEYS[2], found)
return #found
`)

// scriptRetry: KEYS processing, ready, delayed; ARGV id, due, ... Ids not in
// this instance's processing list are left where they are.
var scriptRetry = redis.NewScript(luaLib + `
local bad = wrong_type('list', 'list', 'zset')
if bad then return bad end
local ids, due = pairs_of(1)
local found = remove_ids(KEYS[1], ids, -1)
place(KEYS[2], KEYS[3], found, due)
return #found
`)

// scriptDead: KEYS processing, members, dead; ARGV ids.
var scriptDead = redis.NewScript(luaLib + `
local bad = wrong_type('list', 'set', 'list')
if bad then return bad end
local found = remove_ids(KEYS[1], ARGV, -1)
bulk('SREM', KEYS[2], found)
bulk('LPUSH', KEYS[3], found)
return #found
`)

// scriptDeadOnce: scriptDead, but an id already among the newest ARGV[1]
// members of the dead list is not listed again. One LRANGE of that window,
// read only when an id was found, instead of an LPOS scan of the whole
// list per id: O(window + ids), not O(ids × dead list). An id that failed
// again is met here soon after its first dead-letter step (a relay or
// resync racing its settle; a lost dead-letter step), so at the newest end;
// one deeper is listed twice, which costs a repeat in a list that is
// statistics only (the dead letters are FAILED rows in Postgres). ARGV ids
// follow the window.
var scriptDeadOnce = redis.NewScript(luaLib + `
local bad = wrong_type('list', 'set', 'list')
if bad then return bad end
local ids = {}
for i = 2, #ARGV do ids[#ids + 1] = ARGV[i] end
local found = remove_ids(KEYS[1], ids, -1)
bulk('SREM', KEYS[2], found)
if #found == 0 then return 0 end
local listed = {}
for _, v in ipairs(redis.call('LRANGE', KEYS[3], 0, tonumber(ARGV[1]) - 1)) do listed[v] = true end
local fresh = {}
for _, id in ipairs(found) do
  if not listed[id] then
    listed[id] = true
    fresh[#fresh + 1] = id
  end
end
bulk('LPUSH', KEYS[3], fresh)
return #found
`)

// scriptDrop: KEYS processing, members; ARGV members that are no id
// (Queue.keepIDs). Returns how many left the processing list.
var scriptDrop = redis.NewScript(luaLib + `
local bad = wrong_type('list', 'set')
if bad then return bad end
local found = remove_ids(KEYS[1], ARGV, 0) -- a bad member may be there twice
bulk('SREM', KEYS[2], ARGV)
return #found
`)

// scriptPromote: KEYS delayed, ready; ARGV now ms, max, horizon ms.
// Earliest due first; then, within max, ids whose score lies past the
// horizon (Queue.Promote): no due this package wrote, so they go to ready,
// where the claim checks Postgres' own due time and defers them if it is
// really later.
var scriptPromote = redis.NewScript(luaLib + `
local bad = wrong_type('zset', 'list')
if bad then return bad end
local max = tonumber(ARGV[2])
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, max)
if #ids < max then
  local far = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. ARGV[3], '+inf', 'LIMIT', 0, max - #ids)
  for _, id in ipairs(far) do ids[#ids + 1] = id end
end
bulk('ZREM', KEYS[1], ids)
bulk('LPUSH', KEYS[2], ids)
return #ids
`)

// scriptReap: KEYS instances, processing, ready; ARGV instance, now ms, force
// ('1' for a graceful release), horizon ms, chunk. Unless forced, a lease
// renewed since the caller listed it as expired is left alone (-1). A
// missing lease counts as expired: a processing list without a lease has
// no owner; so does one expiring past the horizon (Queue.Reap): no Renew
// writes that, and such a lease would keep a dead instance's list for good.
// At most chunk ids move per call, the newest first, each chunk to the
// fetching end of ready, so that when the list is empty ready holds them
// oldest first as one move would have; the lease stays until the list is
// empty, so a chunk reaped is never a lease dropped with ids left behind
// (and a renewal between chunks stops the reap: the owner is back). Returns
// how many ids moved; fewer than chunk means the list is empty and the
// lease gone.
var scriptReap = redis.NewScript(luaLib + `
local bad = wrong_type('zset', 'list', 'list')
if bad then return bad end
if ARGV[3] ~= '1' then
  local s = redis.call('ZSCORE', KEYS[1], ARGV[1])
  if s then
    s = tonumber(s)
    if s > tonumber(ARGV[2]) and s <= tonumber(ARGV[4]) then return -1 end
  end
end
local n = tonumber(ARGV[5])
local ids = redis.call('LRANGE', KEYS[2], 0, n - 1)
bulk('RPUSH', KEYS[3], ids)
if #ids > 0 then redis.call('LTRIM', KEYS[2], #ids, -1) end
if redis.call('LLEN', KEYS[2]) == 0 then
  redis.call('ZREM', KEYS[1], ARGV[1])
end
return #ids
`)

// scriptDeadReplay: KEYS dead, members, ready; ARGV take, ids... With take >
// 0 the take oldest dead ids are replayed, else the ids given. An id that
// is queued already (the sweeper pushed it after a replay in Postgres) only
// leaves dead. Returns how many ids left dead.
var scriptDeadReplay = redis.NewScript(luaLib + `
local bad = wrong_type('list', 'set', 'list')
if bad then return bad end
local take = tonumber(ARGV[1])
local ids
if take > 0 then
  ids = redis.call('LRANGE', KEYS[1], -take, -1)
  if #ids > 0 then redis.call('LTRIM', KEYS[1], 0, -#ids - 1) end
  local seen, uniq = {}, {}
  for i = #ids, 1, -1 do
    if not seen[ids[i]] then
      seen[ids[i]] = true
      uniq[#uniq + 1] = ids[i]
    end
  end
  ids = uniq
else
  local want = {}
  for i = 2, #ARGV do want[#want + 1] = ARGV[i] end
  ids = remove_ids(KEYS[1], want, 0)
end
local fresh = {}
for i = 1, #ids, chunk do
  local j = math.min(i + chunk - 1, #ids)
  local m = redis.call('SMISMEMBER', KEYS[2], unpack(ids, i, j))
  for k = 1, #m do
    if m[k] == 0 then fresh[#fresh + 1] = ids[i + k - 1] end
  end
end
bulk('SADD', KEYS[2], fresh)
bulk('LPUSH', KEYS[3], fresh)
return #ids
`)

// scriptDeadRemove: KEYS dead; ARGV budget, then ids; no ids = all.
// Returns how many ids were dropped, or -1 when dropping them here would
// read more than budget elements of the list (each id an LREM of the whole
// list): Queue.DeadRemove then filters the list in bounded steps
// (scriptDeadFilter) instead.
var scriptDeadRemove = redis.NewScript(luaLib + `
local bad = wrong_type('list')
if bad then return bad end
if #ARGV == 1 then
  local n = redis.call('LLEN', KEYS[1])
  redis.call('UNLINK', KEYS[1])
  return n
end
local ids = {}
for i = 2, #ARGV do ids[#ids + 1] = ARGV[i] end
local len = redis.call('LLEN', KEYS[1])
if len > 32 * #ids and len * #ids > tonumber(ARGV[1]) then return -1 end
return #remove_ids(KEYS[1], ids, 0)
`)

// scriptDeadFilter: KEYS dead, drop (a hash: id -> '0', '1' once dropped);
// ARGV sentinel, count, first ('1' on the first step), stale (ms). One
// bounded step of filtering the dead list: the first step marks where the
// list began (LPUSH sentinel); each step takes count ids off the old end,
// drops those in drop and puts the others back at the new end, in order,
// so once the sentinel comes off every id that was in the list has been
// looked at once and the survivors are where they were, oldest last. Ids
// popped past the sentinel (put back by this filter, or dead-lettered
// since) go back to the old end as they were. Another filter's sentinel
// stays, unless it was written before stale (its filter died: deadSentinel
// names the time). Returns {ids dropped for the first time, elements
// taken, done}.
var scriptDeadFilter = redis.NewScript(luaLib + `
local bad = wrong_type('list', 'hash')
if bad then return bad end
local sentinel, prefix = ARGV[1], '` + deadSentinel + `'
if ARGV[3] == '1' then redis.call('LPUSH', KEYS[1], sentinel) end
local got = redis.call('RPOP', KEYS[1], tonumber(ARGV[2]))
if not got then return {0, 0, 1} end
local dropped, done, keep, back = 0, 0, {}, {}
local stale = tonumber(ARGV[4])
for _, v in ipairs(got) do
  if done == 1 then
    back[#back + 1] = v
  elseif v == sentinel then
    done = 1
  elseif string.sub(v, 1, #prefix) == prefix then
    local at = tonumber(string.match(v, '^[^:]*:[^:]*:(%d+):'))
    if not at or at >= stale then keep[#keep + 1] = v end
  else
    local f = redis.call('HGET', KEYS[2], v)
    if not f then
      keep[#keep + 1] = v
    elseif f == '0' then
      redis.call('HSET', KEYS[2], v, '1')
      dropped = dropped + 1
    end
  end
end
bulk('LPUSH', KEYS[1], keep)
local rev = {}
for i = #back, 1, -1 do rev[#rev + 1] = back[i] end
bulk('RPUSH', KEYS[1], rev)
return {dropped, #got, done}
`)

// scriptEpoch: KEYS epoch; ARGV fresh id. Returns the epoch, creating it;
// a key that is no string or longer than 64 bytes is replaced.
var scriptEpoch = redis.NewScript(`
local t = redis.call('TYPE', KEYS[1])['ok']
if t ~= 'none' and (t ~= 'string' or redis.call('STRLEN', KEYS[1]) > 64) then
  -- Not an epoch this package wrote (rand.Text, 26 bytes): replaced, which
  -- reads as a change (one resync) rather than failing or costing its
  -- size on every check.
  redis.call('DEL', KEYS[1])
end
local v = redis.call('GET', KEYS[1])
if not v then
  v = ARGV[1]
  redis.call('SET', KEYS[1], v)
end
return v
`)
