package postgres

// The queries on Baton's hot paths — ingest, the deliverers' and the inbox
// sweep's claims, the lookups every event and turn make — are named here,
// in one place, so that TestHotQueriesUseIndexes can ask PostgreSQL for
// the plan of each and fail on a sequential scan of a table: a store of a
// year's tasks must answer them from an index. A query added to a hot
// path belongs in hotQueries.

// hotQuery is a named hot query.
type hotQuery struct {
	name string
	sql  string
	// live names a partial index the plan may read whole: it holds only
	// work in flight (pending messages), so reading it all costs what is
	// waiting, not what the store has done.
	live string
}

// hotQueries lists the hot queries; the test asks for the generic plan of
// each.
var hotQueries = []hotQuery{
	{"TaskByThread", qTaskByThread, ""},
	{"CommentByMsg", qCommentByMsg, ""},
	{"RecentComments", qRecentComments, ""},
	{"JobByID", qJobByID, ""},
	{"ActiveJob", qActiveJob, ""},
	{"JobEvents", qJobEvents, ""},
	{"OutboxClaim", qOutboxClaim, ""},
	{"OutboxRelease", qOutboxRelease, ""},
	{"StatusMessage", qStatusMessage, ""},
	{"RefMessage", qRefMessage, ""},
	{"InboundKnown", qInboundKnown, ""},
	{"InboxClaim", qInboxClaim, ""},
	{"InboxByKey", qInboxByKey, ""},
	// Retention runs off the hot path, but on the largest tables.
	{"PruneEvents", qPruneEvents, ""},
	{"PruneComments", qPruneComments, ""},
	{"PrunableJobs", qPrunableJobs, "outbox_pending"},
}

var (
	qTaskByThread = `SELECT ` + taskCols + ` FROM tasks WHERE platform = $1 AND team = $2 AND channel = $3 AND thread = $4`
	qCommentByMsg = `SELECT ` + commentCols + ` FROM comments
			WHERE task_id = $1 AND platform_msg_id = $2`
	qRecentComments = `SELECT ` + commentCols + ` FROM comments
		WHERE task_id = $1 ORDER BY id DESC LIMIT $2`
	qJobByID   = `SELECT ` + jobCols + ` FROM jobs WHERE id = $1`
	qActiveJob = `SELECT ` + jobCols + ` FROM jobs
		WHERE task_id = $1 AND state = ANY($2) ORDER BY id DESC LIMIT 1`
	qJobEvents = `SELECT id, job_id, at, kind, movement, detail FROM job_events
		WHERE job_id = $1 ORDER BY id`
	qOutboxClaim = `WITH picked AS MATERIALIZED (
				SELECT o.id FROM outbox o JOIN tasks t ON t.id = o.task_id
				WHERE t.platform = $1 AND o.state = $2 AND o.task_id > $7
				  AND o.next_try_at <= $3 AND o.claimed_until <= $3
				  AND o.seq = (SELECT MIN(p.seq) FROM outbox p WHERE p.task_id = o.task_id AND p.state = $2)
				ORDER BY o.task_id, o.seq
				LIMIT $4
				FOR UPDATE OF o SKIP LOCKED)
			UPDATE outbox o SET claimed_by = $5, claimed_until = $6, claims = o.claims + 1
			FROM picked WHERE o.id = picked.id
			RETURNING ` + outboxCols
	qOutboxRelease = `UPDATE outbox SET claimed_by = '', claimed_until = 0, claims = GREATEST(claims - $2, 0)
			WHERE claimed_by = $1 AND state = $3 AND id = ANY($4)`
	qStatusMessage = `SELECT platform_msg_id FROM outbox
		WHERE job_id = $1 AND kind = $2 AND ref = '' AND state = $3 AND platform_msg_id <> ''
		ORDER BY id LIMIT 1`
	qRefMessage = `SELECT platform_msg_id FROM outbox
		WHERE task_id = $1 AND ref = $2 AND kind = $3 AND state = $4 AND platform_msg_id <> ''
		ORDER BY id LIMIT 1`
	qInboundKnown = `SELECT EXISTS (SELECT 1 FROM inbound_events WHERE key = ANY($1))`
	qInboxClaim   = `UPDATE inbox SET due_at = $1, tries = tries + 1
			WHERE id IN (SELECT id FROM inbox WHERE platform = $2 AND due_at <= $3
				ORDER BY received_at, id LIMIT $4 FOR UPDATE SKIP LOCKED)
			RETURNING ` + inboxCols
	qInboxByKey = `SELECT ` + inboxCols + ` FROM inbox WHERE platform = $1 AND key = $2`
)
