package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"syscall"
)

// Own gives dir and everything below it, except the subtrees named in keep
// (slash-separated, relative to dir, e.g. "logs"), to the sandbox's user
// when Owner differs from Baton's (Baton runs as root), so that a
// sandboxed command can write what Baton created there; otherwise it does
// nothing. Call it before a command that may write dir, while no
// sandboxed command runs over dir.
//
// It goes through an os.Root at dir and changes owners without following
// symlinks, and leaves alone a regular file with more than one link (a
// hard link to a file outside must not change hands).
func (s *Sandbox) Own(dir string, keep ...string) error {
	uid, gid, differs := s.Owner()
	if !differs {
		return nil
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("own %s: %w", dir, err)
	}
	defer root.Close()
	err = fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		for _, k := range keep {
			if p == path.Clean(k) {
				if d.IsDir() {
					return fs.SkipDir
				}
				return nil
			}
		}
		fi, err := root.Lstat(p)
		if err != nil {
			return nil // gone meanwhile
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok || (int(st.Uid) == uid && int(st.Gid) == gid) {
			return nil
		}
		if fi.Mode().IsRegular() && st.Nlink > 1 {
			return nil
		}
		return root.Lchown(p, uid, gid)
	})
	if err != nil {
		return fmt.Errorf("own %s: %w", dir, err)
	}
	return nil
}
