package migration

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestOnline(t *testing.T) {
	for _, tc := range []struct {
		script string
		want   bool
	}{
		{"-- baton:online\nCREATE INDEX a ON t (x);\n", true},
		{"-- Indexes for pruning.\n\n-- baton:online\nCREATE INDEX a ON t (x);\n", true},
		{"CREATE INDEX a ON t (x);\n-- baton:online\n", false},
		{"-- baton:onlineish\nCREATE INDEX a ON t (x);\n", false},
		{"CREATE INDEX a ON t (x);\n", false},
	} {
		if got := Online(tc.script); got != tc.want {
			t.Errorf("Online(%q) = %v, want %v", tc.script, got, tc.want)
		}
	}
}

func TestSteps(t *testing.T) {
	script := `-- baton:online
-- Two indexes and a backfill.
CREATE INDEX CONCURRENTLY IF NOT EXISTS jobs_finished ON jobs (finished_at)
    WHERE state IN ('succeeded', 'failed');
create unique index if not exists outbox_job on outbox(job_id, id);

-- baton:batch
UPDATE jobs SET queued_at = created_at
WHERE id IN (SELECT id FROM jobs WHERE queued_at = 0 LIMIT @batch);
ALTER TABLE jobs ADD COLUMN x INTEGER;
`
	got, err := Steps(script)
	if err != nil {
		t.Fatal(err)
	}
	want := []Step{
		{SQL: "CREATE INDEX CONCURRENTLY IF NOT EXISTS jobs_finished ON jobs (finished_at)\n    WHERE state IN ('succeeded', 'failed')",
			Index: "jobs_finished", Table: "jobs", Concurrently: true},
		{SQL: "create unique index if not exists outbox_job on outbox(job_id, id)", Index: "outbox_job", Table: "outbox"},
		{SQL: "UPDATE jobs SET queued_at = created_at\nWHERE id IN (SELECT id FROM jobs WHERE queued_at = 0 LIMIT @batch)", Batch: true},
		{SQL: "ALTER TABLE jobs ADD COLUMN x INTEGER"},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("Steps (-want +got):\n%s", d)
	}
}

func TestStepsRefuses(t *testing.T) {
	for name, script := range map[string]string{
		"no semicolon":         "-- baton:online\nCREATE INDEX a ON t (x)\n",
		"batch without @batch": "-- baton:online\n-- baton:batch\nUPDATE t SET x = 1 WHERE x = 0;\n",
		"dangling batch":       "-- baton:online\nCREATE INDEX a ON t (x);\n-- baton:batch\n",
	} {
		if _, err := Steps(script); err == nil {
			t.Errorf("%s: Steps accepted %q", name, script)
		}
	}
}
