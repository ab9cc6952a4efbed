package sqlite

// The queries on Baton's hot paths — ingest, the deliverers' and the inbox
// sweep's claims, the lookups every event and turn make — are named here,
// in one place, so that TestHotQueriesUseIndexes can ask SQLite for the
// plan of each and fail on a full scan of a table: a store of a year's
// tasks must answer them from an index. A query added to a hot path
// belongs in hotQueries.

// hotQuery is a named hot query. Its parameters are left unbound (NULL)
// when its plan is asked: the plan does not depend on them.
type hotQuery struct {
	name string
	sql  string
	// by, when set, is the access the plan must take: a query given the
	// rows it touches (by id) must find them by that key, not search an
	// index of a column many rows share — a search the scan check alone
	// lets pass, whose cost grows with the rows sharing the value.
	by string
}

// hotQueries lists the hot queries; the test runs EXPLAIN QUERY PLAN on each.
var hotQueries = []hotQuery{
	{"TaskByThread", qTaskByThread, ""},
	{"CommentByMsg", qCommentByMsg, ""},
	{"RecentComments", qRecentComments, ""},
	{"JobByID", qJobByID, ""},
	{"ActiveJob", qActiveJob, ""},
	{"JobEvents", qJobEvents, ""},
	{"OutboxNextSeq", qOutboxNextSeq, ""},
	{"OutboxDue", qOutboxDue, ""},
	{"OutboxClaim", qOutboxClaim, ""},
	{"OutboxRelease", qOutboxRelease, "SEARCH outbox USING INTEGER PRIMARY KEY"},
	{"StatusMessage", qStatusMessage, ""},
	{"RefMessage", qRefMessage, ""},
	{"InboundKnown", qInboundKnown, ""},
	{"InboxDue", qInboxDue, ""},
	{"InboxClaim", qInboxClaim, ""},
	{"InboxByKey", qInboxByKey, ""},
	// Retention runs off the hot path, but on the largest tables.
	{"PruneEvents", qPruneEvents, ""},
	{"PruneComments", qPruneComments, ""},
	{"PrunableJobs", qPrunableJobs, ""},
}

var (
	qTaskByThread = `SELECT ` + taskCols + ` FROM tasks
		WHERE platform = ? AND team = ? AND channel = ? AND thread = ?`
	qCommentByMsg = `SELECT ` + commentCols + ` FROM comments
			WHERE task_id = ? AND platform_msg_id = ?`
	qRecentComments = `SELECT ` + commentCols + ` FROM comments
		WHERE task_id = ? ORDER BY id DESC`
	qJobByID   = `SELECT ` + jobCols + ` FROM jobs WHERE id = ?`
	qActiveJob = `SELECT ` + jobCols + ` FROM jobs
		WHERE task_id = ? AND state IN (?, ?, ?, ?, ?) ORDER BY id DESC LIMIT 1`
	qJobEvents = `SELECT id, job_id, at, kind, movement, detail FROM job_events
		WHERE job_id = ? ORDER BY id`
	qOutboxNextSeq = `SELECT COALESCE(MAX(seq), 0) + 1 FROM outbox WHERE task_id = ?`
	qOutboxDue     = `SELECT COUNT(*) FROM (` + dueOutbox("?3") + ` LIMIT 1)`
	qOutboxClaim   = `UPDATE outbox SET claimed_by = ?3, claimed_until = ?4, claims = claims + 1
			WHERE id IN (` + dueOutbox("?6") + ` LIMIT ?5)
			RETURNING ` + returningOutbox
	// qOutboxRelease finds the messages by id alone (the unary + keeps
	// the planner off outbox_pending, whose search by state would read
	// every pending message: a backlog of thousands in a paced channel,
	// for each round's hand-back).
	qOutboxRelease = `UPDATE outbox SET claimed_by = '', claimed_until = 0, claims = MAX(claims - ?2, 0)
			WHERE id IN (SELECT value FROM json_each(?3)) AND +claimed_by = ?1 AND +state = 'pending'`
	qStatusMessage = `SELECT platform_msg_id FROM outbox
		WHERE job_id = ? AND kind = ? AND ref = '' AND state = ? AND platform_msg_id IS NOT NULL AND platform_msg_id <> ''
		ORDER BY id LIMIT 1`
	qRefMessage = `SELECT platform_msg_id FROM outbox
		WHERE task_id = ? AND ref = ? AND kind = ? AND state = ? AND platform_msg_id <> ''
		ORDER BY id LIMIT 1`
	qInboundKnown = `SELECT 1 FROM inbound_events WHERE key = ?`
	qInboxDue     = `SELECT COUNT(*) FROM (SELECT 1 FROM inbox WHERE platform = ? AND due_at <= ? LIMIT 1)`
	qInboxClaim   = `UPDATE inbox SET due_at = ?, tries = tries + 1
			WHERE id IN (SELECT id FROM inbox WHERE platform = ? AND due_at <= ? ORDER BY received_at, id LIMIT ?)
			RETURNING ` + inboxCols
	qInboxByKey = `SELECT ` + inboxCols + ` FROM inbox WHERE platform = ? AND key = ?`
)
