package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/baton-bot/baton/configs"
	"github.com/baton-bot/baton/core/piece"
	"github.com/baton-bot/baton/core/tools"
)

// piecesError is a problem of the built-in pieces or of pieces_dir: the
// configuration's to fix, so exit 2 (ExitCode). Its text lists one problem
// a line, each with its file and line.
type piecesError struct{ err error }

func (e *piecesError) Error() string { return "pieces: " + e.err.Error() }
func (e *piecesError) Unwrap() error { return e.err }

// checkPieces loads the built-in pieces and pieces_dir with the rules that
// need no sandbox (the built-in tools known, the network not judged), so
// that a broken pieces_dir is told before anything is created under
// data_dir: the store, workspaces/, the sandbox's probe. loadPieces judges
// the network once the sandbox is known.
func checkPieces(cfg Config) error {
	if err := piecesOutsideWorkspaces(cfg); err != nil {
		return err
	}
	set := tools.Builtin(new(tools.Bash), nil) // for the names only
	rules := piece.Rules{KnownTool: func(name string) bool { _, ok := set.Lookup(name); return ok }}
	if _, err := piece.Load(configs.FS, cfg.PiecesDir, rules); err != nil {
		return &piecesError{err: err}
	}
	return nil
}

// piecesErr reports a problem of the pieces for `baton pieces`: each
// problem on a line of its own, exit 2.
func (m *Main) piecesErr(err error) error {
	var pe *piecesError
	if !errors.As(err, &pe) {
		return configErr("pieces", err)
	}
	fmt.Fprintln(m.Stderr, pe.err)
	return &exitError{code: exitUsage, err: errors.New("baton pieces: invalid pieces"), reported: true}
}

// piecesProblem formats a piecesError for a command that was starting.
func piecesProblem(cmd string, pe *piecesError) error {
	lines := strings.Split(pe.err.Error(), "\n")
	return &exitError{code: exitUsage, err: fmt.Errorf("baton %s: the pieces do not load (fix pieces_dir or the files named):\n  %s", cmd, strings.Join(lines, "\n  "))}
}
