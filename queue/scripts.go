package queue

import "github.com/redis/go-redis/v9"

// The Lua scripts behind Redis. Each one is a single atomic step that keeps
// a job's hash and the index its state names (pending, active, retry, dead,
// parked) in step. Times are milliseconds of the Redis server's clock, read
// with TIME, so that workers' clocks never matter.
//
// Ringing the doorbell pushes a token on the signal list for one idle
// claimer blocked in BLPOP; the list is trimmed so tokens nobody waited for
// cannot pile up.

// ringLua defines ring(signal), which rings the doorbell: a token pushed on
// the signal list for an idle claimer, the list trimmed so that tokens
// nobody waited for cannot pile up. Scripts that ring start with it.
const ringLua = `
local function ring(signal)
  if redis.call('LPUSH', signal, '1') > 64 then
    redis.call('LTRIM', signal, 0, 63)
  end
end
`

var enqueueScript = redis.NewScript(ringLua + `
-- enqueue: make a new job ready, unless the queue already knows it.
-- KEYS[1] job hash, KEYS[2] pending, KEYS[3] signal
-- ARGV[1] job id
-- Returns 1 when enqueued, 0 when the job was already known.
if redis.call('HSETNX', KEYS[1], 'state', 'pending') == 0 then
  return 0
end
redis.call('LPUSH', KEYS[2], ARGV[1])
ring(KEYS[3])
return 1
`)

var claimScript = redis.NewScript(`
-- claim: move due retries to pending, then lease up to ARGV[4] pending
-- jobs. Needs Redis 6.2 or later (RPOP with a count).
-- KEYS[1] pending, KEYS[2] active, KEYS[3] retry
-- ARGV[1] job key prefix, ARGV[2] lease (ms), ARGV[3] finished-hash TTL (s),
-- ARGV[4] how many jobs at most
-- Returns {n, deadline, id1, attempt1, failures1, id2, ...} for n ≥ 1
-- claimed jobs, or {0, wait} when none is ready: wait is the time (ms)
-- until the next retry is due, -1 when there is none.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local due = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now, 'LIMIT', 0, 100)
if #due > 0 then
  redis.call('ZREM', KEYS[3], unpack(due))
  for _, id in ipairs(due) do
    redis.call('HSET', ARGV[1] .. id, 'state', 'pending')
  end
  redis.call('LPUSH', KEYS[1], unpack(due))
end
local want = tonumber(ARGV[4])
local deadline = now + tonumber(ARGV[2])
local out = {0, deadline}
local zadd = {}
local n = 0
while n < want do
  local ids = redis.call('RPOP', KEYS[1], want - n)
  if not ids then
    break
  end
  for _, id in ipairs(ids) do
    local key = ARGV[1] .. id
    local h = redis.call('HMGET', key, 'state', 'attempt', 'failures', 'abort')
    if h[1] == 'pending' then
      if h[4] == '1' then
        redis.call('HSET', key, 'state', 'done')
        redis.call('EXPIRE', key, ARGV[3])
      else
        local attempt = (tonumber(h[2]) or 0) + 1
        redis.call('HSET', key, 'state', 'active', 'attempt', attempt)
        zadd[#zadd + 1] = deadline
        zadd[#zadd + 1] = id
        out[#out + 1] = tonumber(id)
        out[#out + 1] = attempt
        out[#out + 1] = tonumber(h[3]) or 0
        n = n + 1
      end
    end
  end
end
if n == 0 then
  local nxt = redis.call('ZRANGE', KEYS[3], 0, 0, 'WITHSCORES')
  if #nxt == 0 then
    return {0, -1}
  end
  return {0, math.max(0, tonumber(nxt[2]) - now)}
end
redis.call('ZADD', KEYS[2], unpack(zadd))
out[1] = n
return out
`)

var heartbeatScript = redis.NewScript(`
-- heartbeat: renew the leases that are still current.
-- KEYS[1] active
-- ARGV[1] job key prefix, ARGV[2] lease (ms),
-- ARGV[3..] pairs of job id and attempt
-- Returns, per pair, 0 lost, 1 renewed, 2 renewed and abort requested.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local deadline = now + tonumber(ARGV[2])
local out = {}
for i = 3, #ARGV, 2 do
  local id = ARGV[i]
  local h = redis.call('HMGET', ARGV[1] .. id, 'state', 'attempt', 'abort')
  if h[1] == 'active' and tonumber(h[2]) == tonumber(ARGV[i + 1]) then
    redis.call('ZADD', KEYS[1], deadline, id)
    if h[3] == '1' then out[#out + 1] = 2 else out[#out + 1] = 1 end
  else
    out[#out + 1] = 0
  end
end
return out
`)

var ackScript = redis.NewScript(`
-- ack: forget a finished job. A job whose lease expired but that no newer
-- attempt claimed (state retry) is acked too: its work was done.
-- KEYS[1] job hash, KEYS[2] active, KEYS[3] retry
-- ARGV[1] job id, ARGV[2] attempt, ARGV[3] finished-hash TTL (s)
-- Returns 1 when acked, 0 when the attempt is stale.
local h = redis.call('HMGET', KEYS[1], 'state', 'attempt')
if tonumber(h[2]) ~= tonumber(ARGV[2]) then
  return 0
end
if h[1] == 'active' then
  redis.call('ZREM', KEYS[2], ARGV[1])
elseif h[1] == 'retry' then
  redis.call('ZREM', KEYS[3], ARGV[1])
else
  return 0
end
redis.call('HSET', KEYS[1], 'state', 'done')
redis.call('EXPIRE', KEYS[1], ARGV[3])
return 1
`)

var ackBatchScript = redis.NewScript(`
-- ack batch: forget finished jobs, as ack does for one.
-- KEYS[1] active, KEYS[2] retry
-- ARGV[1] job key prefix, ARGV[2] finished-hash TTL (s),
-- ARGV[3..] pairs of job id and attempt
-- Returns how many were acked (stale attempts change nothing).
local fromActive, fromRetry = {}, {}
for i = 3, #ARGV, 2 do
  local key = ARGV[1] .. ARGV[i]
  local h = redis.call('HMGET', key, 'state', 'attempt')
  if tonumber(h[2]) == tonumber(ARGV[i + 1]) and (h[1] == 'active' or h[1] == 'retry') then
    if h[1] == 'active' then
      fromActive[#fromActive + 1] = ARGV[i]
    else
      fromRetry[#fromRetry + 1] = ARGV[i]
    end
    redis.call('HSET', key, 'state', 'done')
    redis.call('EXPIRE', key, ARGV[2])
  end
end
if #fromActive > 0 then
  redis.call('ZREM', KEYS[1], unpack(fromActive))
end
if #fromRetry > 0 then
  redis.call('ZREM', KEYS[2], unpack(fromRetry))
end
return #fromActive + #fromRetry
`)

var nackScript = redis.NewScript(ringLua + `
-- nack: count a failure and make the job ready again after a delay.
-- KEYS[1] job hash, KEYS[2] active, KEYS[3] retry, KEYS[4] pending,
-- KEYS[5] signal
-- ARGV[1] job id, ARGV[2] attempt, ARGV[3] delay (ms)
-- Returns 1 when done, 0 when the attempt is stale.
local h = redis.call('HMGET', KEYS[1], 'state', 'attempt')
if h[1] ~= 'active' or tonumber(h[2]) ~= tonumber(ARGV[2]) then
  return 0
end
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('HINCRBY', KEYS[1], 'failures', 1)
local delay = tonumber(ARGV[3])
if delay <= 0 then
  redis.call('HSET', KEYS[1], 'state', 'pending')
  redis.call('LPUSH', KEYS[4], ARGV[1])
else
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  redis.call('HSET', KEYS[1], 'state', 'retry')
  redis.call('ZADD', KEYS[3], now + delay, ARGV[1])
end
-- Wake an idle claimer either way, so that it learns the new due time.
ring(KEYS[5])
return 1
`)

var requeueScript = redis.NewScript(ringLua + `
-- requeue: put a leased job back at the head of pending, no failure counted.
-- KEYS[1] job hash, KEYS[2] active, KEYS[3] pending, KEYS[4] signal
-- ARGV[1] job id, ARGV[2] attempt
-- Returns 1 when done, 0 when the attempt is stale.
local h = redis.call('HMGET', KEYS[1], 'state', 'attempt')
if h[1] ~= 'active' or tonumber(h[2]) ~= tonumber(ARGV[2]) then
  return 0
end
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('HSET', KEYS[1], 'state', 'pending')
redis.call('RPUSH', KEYS[3], ARGV[1])
ring(KEYS[4])
return 1
`)

var parkScript = redis.NewScript(ringLua + `
-- park: release the lease of a job that waits under a wait sequence. Like
-- ack, it also settles a job whose lease expired but that no newer attempt
-- claimed. When a resume for this wait (or a later one) arrived while the
-- job was still running, the job is made ready at once instead.
-- KEYS[1] job hash, KEYS[2] active, KEYS[3] retry, KEYS[4] parked,
-- KEYS[5] pending, KEYS[6] signal
-- ARGV[1] job id, ARGV[2] attempt, ARGV[3] wait sequence
-- Returns 1 when parked, 2 when made ready at once, 0 when the attempt is
-- stale.
local h = redis.call('HMGET', KEYS[1], 'state', 'attempt', 'rwseq')
if tonumber(h[2]) ~= tonumber(ARGV[2]) then
  return 0
end
if h[1] == 'active' then
  redis.call('ZREM', KEYS[2], ARGV[1])
elseif h[1] == 'retry' then
  redis.call('ZREM', KEYS[3], ARGV[1])
else
  return 0
end
if h[3] and tonumber(h[3]) >= tonumber(ARGV[3]) then
  redis.call('HSET', KEYS[1], 'state', 'pending', 'wseq', ARGV[3])
  redis.call('LPUSH', KEYS[5], ARGV[1])
  ring(KEYS[6])
  return 2
end
redis.call('HSET', KEYS[1], 'state', 'parked', 'wseq', ARGV[3])
redis.call('SADD', KEYS[4], ARGV[1])
return 1
`)

var resumeScript = redis.NewScript(ringLua + `
-- resume: make a job parked under a wait sequence ready again, once. A job
-- still running (its worker has recorded the wait in the store but not yet
-- parked it here) keeps the resume for its park to apply.
-- KEYS[1] job hash, KEYS[2] parked, KEYS[3] pending, KEYS[4] signal
-- ARGV[1] job id, ARGV[2] wait sequence
-- Returns 1 when resumed, 2 when kept for the coming park, 0 when the job
-- is not waiting under it.
local h = redis.call('HMGET', KEYS[1], 'state', 'wseq', 'rwseq')
if h[1] == 'active' or h[1] == 'retry' then
  if h[3] and tonumber(h[3]) >= tonumber(ARGV[2]) then
    return 0
  end
  redis.call('HSET', KEYS[1], 'rwseq', ARGV[2])
  return 2
end
if h[1] ~= 'parked' or tonumber(h[2]) ~= tonumber(ARGV[2]) then
  return 0
end
redis.call('SREM', KEYS[2], ARGV[1])
redis.call('HSET', KEYS[1], 'state', 'pending')
redis.call('LPUSH', KEYS[3], ARGV[1])
ring(KEYS[4])
return 1
`)

var abortScript = redis.NewScript(`
-- abort: flag a job aborted. A job that is not running leaves the queue at
-- once (state done); a running one keeps its lease until its worker stops,
-- and the aborts channel tells the workers.
-- KEYS[1] job hash, KEYS[2] pending, KEYS[3] retry, KEYS[4] parked
-- ARGV[1] job id, ARGV[2] finished-hash TTL (s), ARGV[3] aborts channel
-- Returns 1 when the job is running, else 0.
local st = redis.call('HGET', KEYS[1], 'state')
if st == 'active' then
  redis.call('HSET', KEYS[1], 'abort', '1')
  redis.call('PUBLISH', ARGV[3], ARGV[1])
  return 1
end
if st == 'done' or st == 'dead' then
  return 0
end
if st == 'pending' then
  redis.call('LREM', KEYS[2], 0, ARGV[1])
elseif st == 'retry' then
  redis.call('ZREM', KEYS[3], ARGV[1])
elseif st == 'parked' then
  redis.call('SREM', KEYS[4], ARGV[1])
end
redis.call('HSET', KEYS[1], 'state', 'done', 'abort', '1')
redis.call('EXPIRE', KEYS[1], ARGV[2])
return 0
`)

var expiredScript = redis.NewScript(`
-- expired: list leases past their deadline (first half of a reap), and drop
-- dead entries older than the finished-hash TTL.
-- KEYS[1] active, KEYS[2] dead
-- ARGV[1] job key prefix, ARGV[2] batch size, ARGV[3] finished-hash TTL (s)
-- Returns a flat list of id, attempt, failures, deadline per expired lease.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now - tonumber(ARGV[3]) * 1000)
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'WITHSCORES', 'LIMIT', 0, tonumber(ARGV[2]))
local out = {}
for i = 1, #ids, 2 do
  local h = redis.call('HMGET', ARGV[1] .. ids[i], 'attempt', 'failures')
  out[#out + 1] = tonumber(ids[i])
  out[#out + 1] = tonumber(h[1]) or 0
  out[#out + 1] = tonumber(h[2]) or 0
  out[#out + 1] = tonumber(ids[i + 1])
end
return out
`)

var reapScript = redis.NewScript(ringLua + `
-- reap: move leases that are still expired to retry after their delay,
-- counting a failure, or to dead once they reach the failure limit.
-- KEYS[1] active, KEYS[2] retry, KEYS[3] dead, KEYS[4] signal
-- ARGV[1] job key prefix, ARGV[2] failure limit (0: none),
-- ARGV[3] finished-hash TTL (s), ARGV[4..] triples of job id, attempt and
-- retry delay (ms)
-- Returns a flat list of id, attempt, failures, deadline per dead job.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local limit = tonumber(ARGV[2])
local out = {}
local retried = false
for i = 4, #ARGV, 3 do
  local id = ARGV[i]
  local key = ARGV[1] .. id
  local deadline = tonumber(redis.call('ZSCORE', KEYS[1], id))
  if deadline and deadline <= now then
    local h = redis.call('HMGET', key, 'state', 'attempt', 'failures')
    if h[1] ~= 'active' then
      -- The index is out of step with the hash; the hash wins.
      redis.call('ZREM', KEYS[1], id)
    elseif tonumber(h[2]) == tonumber(ARGV[i + 1]) then
      local failures = (tonumber(h[3]) or 0) + 1
      redis.call('ZREM', KEYS[1], id)
      if limit > 0 and failures >= limit then
        redis.call('HSET', key, 'state', 'dead', 'failures', failures)
        redis.call('EXPIRE', key, ARGV[3])
        redis.call('ZADD', KEYS[3], now, id)
        out[#out + 1] = tonumber(id)
        out[#out + 1] = tonumber(h[2])
        out[#out + 1] = failures
        out[#out + 1] = deadline
      else
        redis.call('HSET', key, 'state', 'retry', 'failures', failures)
        redis.call('ZADD', KEYS[2], now + tonumber(ARGV[i + 2]), id)
        retried = true
      end
    end
  end
end
if retried then
  ring(KEYS[4])
end
return out
`)

var reconcileScript = redis.NewScript(`
-- reconcile: dispatch again the jobs the store says are queued or running
-- that this queue lost (no hash) or holds inconsistently (finished, parked,
-- or missing from the index its state names). Jobs pending, active or in
-- retry are left where they are; only their attempt is raised to the
-- store's.
-- KEYS[1] pending, KEYS[2] active, KEYS[3] retry, KEYS[4] dead,
-- KEYS[5] parked, KEYS[6] signal
-- ARGV[1] job key prefix, ARGV[2..] pairs of job id and minimum attempt
-- Returns how many jobs it dispatched again.
local n = 0
for i = 2, #ARGV, 2 do
  local id = ARGV[i]
  local key = ARGV[1] .. id
  local h = redis.call('HMGET', key, 'state', 'attempt')
  local st = h[1]
  local attempt = tonumber(h[2]) or 0
  local floor = tonumber(ARGV[i + 1])
  local healthy = st == 'pending'
    or (st == 'active' and redis.call('ZSCORE', KEYS[2], id))
    or (st == 'retry' and redis.call('ZSCORE', KEYS[3], id))
  if healthy then
    -- A running lease keeps its attempt: raising it would fence off its
    -- worker.
    if st ~= 'active' and attempt < floor then
      redis.call('HSET', key, 'attempt', floor)
    end
  else
    redis.call('ZREM', KEYS[2], id)
    redis.call('ZREM', KEYS[3], id)
    redis.call('ZREM', KEYS[4], id)
    redis.call('SREM', KEYS[5], id)
    redis.call('HSET', key, 'state', 'pending', 'attempt', math.max(attempt, floor))
    redis.call('PERSIST', key)
    redis.call('LPUSH', KEYS[1], id)
    n = n + 1
  end
end
if n > 0 then
  local tokens = {}
  for i = 1, math.min(n, 64) do
    tokens[i] = '1'
  end
  if redis.call('LPUSH', KEYS[6], unpack(tokens)) > 64 then
    redis.call('LTRIM', KEYS[6], 0, 63)
  end
end
return n
`)

var positionScript = redis.NewScript(`
-- position: a job's place among the ready jobs (1: claimed next).
-- KEYS[1] pending
-- ARGV[1] job id
-- Returns the place, or 0 when the job is not on the pending list.
local i = redis.call('LPOS', KEYS[1], ARGV[1])
if not i then
  return 0
end
return redis.call('LLEN', KEYS[1]) - i
`)
