// Package docparsetest lets a package's tests run the document parser's
// child without the baton binary: the test binary itself becomes the child.
//
//	func TestMain(m *testing.M) { docparsetest.Main(m) }
//
// and a test parses with docparsetest.Runner(t).
package docparsetest

import (
	"os"
	"testing"

	"github.com/baton-bot/baton/core/docparse"
)

// Main runs the parser child when the test binary is started with
// docparse.Subcommand, as the baton binary is; otherwise it runs the tests.
// It does not return.
func Main(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == docparse.Subcommand {
		os.Exit(docparse.Main(os.Stdin, os.Stdout))
	}
	os.Exit(m.Run())
}

// Runner returns a Runner whose child is this test binary (see Main).
func Runner(tb testing.TB) *docparse.Runner {
	tb.Helper()
	exe, err := os.Executable()
	if err != nil {
		tb.Fatal(err)
	}
	return &docparse.Runner{Command: docparse.Exec(exe, docparse.Subcommand)}
}
