package sqlite

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
)

// walSyncer makes committed writes durable against a power loss, off the
// writer's path. The store commits with synchronous=NORMAL: a commit is in
// the WAL file, in the kernel's page cache, when it returns, and reaches
// the disk at the next checkpoint. A durable write is handed to the
// syncer once committed; the syncer calls fdatasync on the WAL file and
// then answers every write it was handed before that call began. One
// fdatasync thus serves all the durable writes committed while the
// previous one ran, and the writer never waits for the disk.
//
// fdatasync on a descriptor of the syncer's own flushes the pages every
// connection (of any process) wrote into the WAL. A commit that a
// checkpoint has already copied into the database file, after which the
// WAL was started over and its frames overwritten, is durable already:
// the checkpoint syncs the database file before the WAL may start over.
type walSyncer struct {
	path string // the WAL file: the database's path and "-wal"
	log  *slog.Logger

	mu      sync.Mutex
	pending []*write      // guarded by mu: committed, waiting for the next fdatasync
	stopped bool          // guarded by mu: stop was called; add answers ErrClosed
	wake    chan struct{} // one token: pending has writes
	quit    chan struct{} // closed by stop
	done    chan struct{} // closed when run has answered every write and returned

	f *os.File // the WAL as last opened; only run touches it

	fdatasync func(*os.File) error // the system's; tests hold it or make it fail
}

func newWALSyncer(dbPath string, log *slog.Logger) *walSyncer {
	return &walSyncer{path: dbPath + "-wal", log: log, wake: make(chan struct{}, 1),
		quit: make(chan struct{}), done: make(chan struct{}), fdatasync: fdatasync}
}

// add hands the syncer writes that are committed; each one's done
// receives nil once the WAL is on disk, or the sync's error (ErrClosed
// once the syncer has stopped). A write with only done set waits for
// everything committed before add.
func (y *walSyncer) add(ws []*write) {
	y.mu.Lock()
	defer y.mu.Unlock()
	if y.stopped {
		for _, w := range ws {
			w.done <- ErrClosed
		}
		return
	}
	y.pending = append(y.pending, ws...)
	select {
	case y.wake <- struct{}{}:
	default:
	}
}

// stop answers the writes handed over so far and stops the syncer. Only
// the writer loop calls it, once it will hand over no more.
func (y *walSyncer) stop() {
	y.mu.Lock()
	y.stopped = true
	y.mu.Unlock()
	close(y.quit)
	<-y.done
}

// run syncs the WAL whenever writes wait for it, until stop.
func (y *walSyncer) run() {
	defer close(y.done)
	defer func() {
		if y.f != nil {
			y.f.Close()
		}
	}()
	for {
		select {
		case <-y.wake:
		case <-y.quit:
			y.round() // writes handed over before stop
			return
		}
		y.round()
	}
}

// round takes the writes waiting, syncs the WAL and answers them.
func (y *walSyncer) round() {
	y.mu.Lock()
	ws := y.pending
	y.pending = nil
	y.mu.Unlock()
	if len(ws) == 0 {
		return
	}
	err := y.sync()
	if err != nil {
		y.log.Error("syncing the store's WAL to disk failed: writes acknowledged as committed may not survive a power loss",
			"path", y.path, "writes", len(ws), "err", err)
		err = fmt.Errorf("sync store's WAL: %w", err)
	}
	for _, w := range ws {
		w.done <- err
	}
}

// sync calls fdatasync on the WAL file, opening it first when it is not
// open or the file at its path is another one (SQLite deletes the WAL
// when the last connection to the database closes, and makes a new one
// on the next open). With no WAL file at all, every commit is in the
// database file, which the checkpoint that emptied the WAL synced.
func (y *walSyncer) sync() error {
	if y.f != nil {
		a, errA := y.f.Stat()
		b, errB := os.Stat(y.path)
		if errA != nil || errB != nil || !os.SameFile(a, b) {
			y.f.Close()
			y.f = nil
		}
	}
	if y.f == nil {
		f, err := os.Open(y.path)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		// A new WAL's directory entry must be on disk too, or the file
		// may be gone after a power loss whatever its contents.
		if err := syncDir(filepath.Dir(y.path)); err != nil {
			f.Close()
			return err
		}
		y.f = f
	}
	return y.fdatasync(y.f)
}

// syncDir fsyncs a directory, so that the entries made in it last
// survive a power loss.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
