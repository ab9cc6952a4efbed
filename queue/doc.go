// Package queue implements core.Queue twice: Redis, which dispatches jobs
// to workers in several processes, and Memory, the in-process queue of the
// embedded default (one process, no Redis). Both pass the conformance suite
// in queue/queuetest and give the same guarantees: at-least-once delivery,
// an attempt number (the fencing token) that grows on every claim, and
// mutations carrying a stale attempt that change nothing.
//
// The store is the system of record; a queue only dispatches ids. Whatever
// a queue loses (a flushed or restarted Redis, a restarted process for
// Memory) is put back by Reconcile from the store's queued and running jobs.
//
// # Redis layout
//
// All keys of one queue share the hash tag {<name>}, so that every script
// touches one cluster slot:
//
//	<prefix>:{<name>}:pending   LIST  ready ids; LPUSH enqueue, RPOP claim, RPUSH requeue at the head
//	<prefix>:{<name>}:active    ZSET  id → lease deadline (ms, Redis server time)
//	<prefix>:{<name>}:retry     ZSET  id → due time (ms, Redis server time)
//	<prefix>:{<name>}:dead      ZSET  id → time declared dead
//	<prefix>:{<name>}:parked    SET   ids waiting for a person or for subtasks
//	<prefix>:{<name>}:job:<id>  HASH  state, attempt, failures, abort, wseq
//	<prefix>:{<name>}:signal    LIST  doorbell rung when a job becomes ready
//	<prefix>:{<name>}:wake:<id>:<n>  LIST  wakes one blocked Claim (its context ended, or Close); expires in 10 s
//	<prefix>:{<name>}:aborts    pub/sub channel carrying aborted ids
//
// Every change is one Lua script, so a job is always in exactly the index
// its hash's state names. Scripts that pop or scan ids build the job keys
// from the prefix they are given; those keys carry the same hash tag.
// Finished hashes (done, dead) expire after seven days; they keep Enqueue
// idempotent meanwhile.
//
// # Deploying Redis
//
// The queue must not lose keys silently: run Redis with
// maxmemory-policy noeviction, and with appendonly yes and appendfsync
// everysec, so that a crash loses at most a second of dispatch state, which
// the reconciler restores from the store. Standalone Redis, Sentinel and
// Redis Cluster are supported: NewRedis takes any go-redis universal
// client. On a cluster one queue lives on the node serving the slot of
// {<name>}; queues of different names spread over the nodes. The aborts
// channel is a plain (not sharded) channel, which a cluster forwards to
// every node.
//
// A Claim waiting for a job holds one connection of the client's pool for
// the whole wait: size the pool (redis.Options.PoolSize) above the number
// of workers that claim concurrently, plus a few for heartbeats and acks.
package queue
