// Package pgtest gives Baton's tests, benchmarks and load tests a
// PostgreSQL schema of their own on a shared server, so that runs never
// meet one another's rows and leave nothing behind. The server is
// BATON_TEST_POSTGRES_URL, or the development machine's (DefaultURL).
//
// A test asks for a URL whose connections use a fresh schema, dropped when
// the test ends:
//
//	url := pgtest.URL(t) // skips without a server, fails with BATON_REQUIRE_POSTGRES=1
//	store, err := postgres.Open(ctx, url, postgres.Options{})
//
// A command that is not a test creates and drops the schema itself with
// NewSchema.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// DefaultURL is the development machine's PostgreSQL: trust auth,
// database test.
const DefaultURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// ServerURL is the server tests use: BATON_TEST_POSTGRES_URL, or
// DefaultURL.
func ServerURL() string {
	if u := os.Getenv("BATON_TEST_POSTGRES_URL"); u != "" {
		return u
	}
	return DefaultURL
}

// ErrNoServer reports that no PostgreSQL server answered.
var ErrNoServer = errors.New("no PostgreSQL server answers")

// Schema is a schema created for one run on a server.
type Schema struct {
	// Name is the schema's name: the prefix given to NewSchema and 12
	// random hex digits.
	Name string
	// URL is the server's URL with search_path set to the schema: every
	// connection made with it creates and finds its tables there.
	URL    string
	server string
}

// NewSchema creates an empty schema named prefix_<random> on the server
// at server (a postgres:// or postgresql:// URL). The error wraps
// ErrNoServer when the server does not answer, and never holds the URL's
// password.
func NewSchema(ctx context.Context, server, prefix string) (*Schema, error) {
	u, err := url.Parse(server)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return nil, errors.New("new schema: the server must be a postgres:// or postgresql:// URL")
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	s := &Schema{Name: prefix + "_" + hex.EncodeToString(b[:]), server: server}
	q := u.Query()
	q.Set("search_path", s.Name)
	u.RawQuery = q.Encode()
	s.URL = u.String()
	if err := s.exec(ctx, "CREATE SCHEMA "+s.Name); err != nil {
		return nil, err
	}
	return s, nil
}

// Drop drops the schema and everything in it.
func (s *Schema) Drop(ctx context.Context) error {
	return s.exec(ctx, "DROP SCHEMA "+s.Name+" CASCADE")
}

func (s *Schema) exec(ctx context.Context, sql string) error {
	cfg, err := pgx.ParseConfig(s.server)
	if err != nil {
		return errors.New("the PostgreSQL URL does not parse") // pgx's error may quote the password
	}
	cfg.ConnectTimeout = 5 * time.Second
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("%w at %s:%d: %w", ErrNoServer, cfg.Host, cfg.Port, redact(err, cfg.Password))
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, sql); err != nil {
		return fmt.Errorf("%s: %w", sql, redact(err, cfg.Password))
	}
	return nil
}

// redact drops err's text when it holds password.
func redact(err error, password string) error {
	if password != "" && strings.Contains(err.Error(), password) {
		return errors.New("(the error quoted the password and is not shown)")
	}
	return err
}

// Server returns ServerURL once a connection to it succeeded, for a test
// that makes its schemas itself (with NewSchema, or through a command that
// does). With no server answering it skips t, or fails it when
// BATON_REQUIRE_POSTGRES=1.
func Server(t testing.TB) string {
	t.Helper()
	cfg, err := pgx.ParseConfig(ServerURL())
	if err != nil {
		t.Fatal("BATON_TEST_POSTGRES_URL does not parse") // pgx's error may quote the password
	}
	cfg.ConnectTimeout = 5 * time.Second
	conn, err := pgx.ConnectConfig(t.Context(), cfg)
	if err != nil {
		unavailable(t, fmt.Errorf("%w at %s:%d: %w", ErrNoServer, cfg.Host, cfg.Port, redact(err, cfg.Password)))
	}
	_ = conn.Close(t.Context())
	return ServerURL()
}

// unavailable skips t for err, or fails it when BATON_REQUIRE_POSTGRES=1.
func unavailable(t testing.TB, err error) {
	t.Helper()
	msg := fmt.Sprintf("PostgreSQL (BATON_TEST_POSTGRES_URL): %v", err)
	if os.Getenv("BATON_REQUIRE_POSTGRES") == "1" {
		t.Fatal(msg + "; BATON_REQUIRE_POSTGRES=1 makes this a failure")
	}
	t.Skip(msg + "; skipping (BATON_REQUIRE_POSTGRES=1 makes this a failure)")
}

// URL returns a URL of ServerURL whose connections use a fresh schema,
// dropped with all it holds when t ends. With no server answering it
// skips t, or fails it when BATON_REQUIRE_POSTGRES=1; any other failure
// fails t.
func URL(t testing.TB) string {
	t.Helper()
	s, err := NewSchema(t.Context(), ServerURL(), "t")
	if err != nil && !errors.Is(err, ErrNoServer) {
		t.Fatalf("PostgreSQL (BATON_TEST_POSTGRES_URL): %v", err)
	}
	if err != nil {
		unavailable(t, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := s.Drop(ctx); err != nil {
			t.Errorf("drop schema %s: %v", s.Name, err)
		}
	})
	return s.URL
}
