package migration

import (
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
)

// File is one migration file.
type File struct {
	Version int    // the number its name starts with (0013_retention.sql: 13)
	Name    string // its base name
	Body    string // its SQL
}

// Files returns the migration files of fsys (migrations/*.sql) in version
// order; a name that does not start with a version number is an error.
func Files(fsys fs.FS) ([]File, error) {
	names, err := fs.Glob(fsys, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	var out []File
	for _, name := range names {
		base := path.Base(name)
		prefix, _, _ := strings.Cut(base, "_")
		version, err := strconv.Atoi(prefix)
		if err != nil {
			return nil, fmt.Errorf("%s: name must start with a version number", base)
		}
		body, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		out = append(out, File{Version: version, Name: base, Body: string(body)})
	}
	return out, nil
}
