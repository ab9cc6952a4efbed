package postgres

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/baton-bot/baton/core"
)

// tableRows are rows of one table that sourceOf hands over.
type tableRows struct {
	table string
	cols  []string
	rows  [][]any
}

func sourceOf(tables ...tableRows) Source {
	return func(ctx context.Context, fn func(string, []string, []any) error) error {
		for _, t := range tables {
			for _, r := range t.rows {
				if err := fn(t.table, t.cols, r); err != nil {
					return err
				}
			}
		}
		return nil
	}
}

var importTaskCols = []string{"id", "parent_task_id", "platform", "team", "channel", "thread", "owner_user", "title", "workspace", "created_at", "updated_at"}

func taskRow(id int64, thread string) []any {
	return []any{id, nil, "slack", "T", "C", thread, "", "", "/ws/" + thread, int64(1700000000000), int64(1700000000000)}
}

// TestImportRefusesWhatItCannotKeep: a column or table the schema does not
// have, a column the source lacks, or a value of the wrong kind fails the
// import, and nothing of it is written.
func TestImportRefusesWhatItCannotKeep(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	for _, tc := range []struct {
		name string
		src  Source
		want string
	}{
		{"unknown column", sourceOf(tableRows{"tasks", append(importTaskCols[:len(importTaskCols):len(importTaskCols)], "colour"), [][]any{append(taskRow(1, "a"), "red")}}), "tasks.colour"},
		{"missing column", sourceOf(tableRows{"tasks", importTaskCols[1:], [][]any{taskRow(1, "a")[1:]}}), "no column tasks.id"},
		{"unknown table", sourceOf(tableRows{"tasks", importTaskCols, [][]any{taskRow(1, "a")}}, tableRows{"widgets", []string{"id"}, [][]any{{int64(1)}}}), "widgets"},
		{"wrong kind", sourceOf(tableRows{"tasks", importTaskCols, [][]any{taskRow(1, "a"), {int64(2), nil, "slack", "T", "C", "b", "", "", "", 1.5, int64(1)}}}), "created_at"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.Import(ctx, tc.src)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Import = %v, want an error naming %q", err, tc.want)
			}
			if got, err := s.Tasks(ctx, core.TaskFilter{}); err != nil || len(got) != 0 {
				t.Errorf("after a failed import: %d tasks, %v; want none", len(got), err)
			}
		})
	}
}

// TestImportIntoFullStore: a store holding a task refuses an import with
// ErrNotEmpty naming the table; an empty one takes it, ids kept and the
// identity set past them.
func TestImportIntoFullStore(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	src := sourceOf(tableRows{"tasks", importTaskCols, [][]any{taskRow(5, "a"), taskRow(9, "b")}},
		tableRows{"store_meta", []string{"key", "value"}, [][]any{{"heartbeat", "1"}, {"store_id", "copied-id"}}})
	counts, err := s.Import(ctx, src)
	if err != nil {
		t.Fatal(err)
	}
	if counts[0] != (Copied{Table: "tasks", Rows: 2}) || len(counts) != len(importTables) {
		t.Errorf("counts = %v", counts)
	}
	if id, _ := s.StoreID(ctx); id != "copied-id" {
		t.Errorf("store id = %q, want the source's", id)
	}
	task, err := s.Task(ctx, 9)
	if err != nil || task.Thread.Thread != "b" || task.Workspace != "/ws/b" {
		t.Errorf("task 9 = %+v, %v", task, err)
	}
	nt := newTask(t, s)
	if nt.ID <= 9 {
		t.Errorf("a new task got id %d, want one above 9", nt.ID)
	}
	_, err = s.Import(ctx, src)
	if !errors.Is(err, ErrNotEmpty) || !strings.Contains(err.Error(), "tasks") {
		t.Errorf("a second import = %v, want ErrNotEmpty naming tasks", err)
	}
}
