package pgtest_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/baton-bot/baton/core/postgres/pgtest"
)

// TestSchemaIsOwnAndDropped: a connection made with the schema's URL
// creates its tables in the schema, and Drop removes the schema.
func TestSchemaIsOwnAndDropped(t *testing.T) {
	ctx := t.Context()
	s, err := pgtest.NewSchema(ctx, pgtest.Server(t), "pgtest")
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, s.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "CREATE TABLE probe (n int)"); err != nil {
		t.Fatal(err)
	}
	var schema string
	if err := conn.QueryRow(ctx, "SELECT table_schema FROM information_schema.tables WHERE table_name = 'probe' AND table_schema = $1", s.Name).Scan(&schema); err != nil {
		t.Fatalf("the table is not in schema %s: %v", s.Name, err)
	}
	if err := s.Drop(ctx); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM information_schema.schemata WHERE schema_name = $1", s.Name).Scan(&n); err != nil || n != 0 {
		t.Errorf("schema %s still there after Drop (%d, %v)", s.Name, n, err)
	}
}

// TestNoServer: a server that does not answer is ErrNoServer, and the
// error does not show the URL's password.
func TestNoServer(t *testing.T) {
	_, err := pgtest.NewSchema(t.Context(), "postgres://u:s3cret-pw@127.0.0.1:1/test?sslmode=disable&connect_timeout=2", "x")
	if !errors.Is(err, pgtest.ErrNoServer) {
		t.Fatalf("NewSchema on a closed port: %v, want ErrNoServer", err)
	}
	if got := err.Error(); strings.Contains(got, "s3cret-pw") {
		t.Errorf("the error shows the password: %s", got)
	}
	if _, err := pgtest.NewSchema(t.Context(), "mysql://localhost/x", "x"); err == nil {
		t.Error("NewSchema accepted a mysql:// URL")
	}
}
