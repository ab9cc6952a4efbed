package api

import (
	"errors"
	"fmt"
	"io/fs"
	"mime"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/baton-bot/baton/core/workspace"
)

// shownFiles caps the files listed per folder.
const shownFiles = 1000

// fileList is the answer of GET /api/tasks/{id}/files: the regular files of
// the task's input/ (what people attached) and output/ (what the agent
// made), sorted by path. Symlinks, folders and special files are not
// listed; logs/ is the engine's and never shown.
type fileList struct {
	Files []fileView `json:"files"`
	// More counts the files left out beyond the first 1000 of a folder.
	More int `json:"more,omitempty"`
}

type fileView struct {
	Path       string    `json:"path"` // "output/report.md": input/ or output/, then the path inside it
	Size       int64     `json:"size"` // bytes
	ModifiedAt time.Time `json:"modified_at"`
	URL        string    `json:"url"` // where GET downloads it
}

// files answers GET /api/tasks/{id}/files. A task whose workspace was never
// made lists no files.
func (a *API) files(w http.ResponseWriter, r *http.Request) {
	task, ok := a.task(w, r)
	if !ok {
		return
	}
	out := fileList{Files: []fileView{}}
	ws, err := workspace.OpenExisting(task.Workspace)
	if errors.Is(err, fs.ErrNotExist) {
		writeJSON(w, http.StatusOK, out)
		return
	}
	if err != nil {
		a.fail(w, r, "list files", err)
		return
	}
	defer ws.Close()
	for _, folder := range []string{workspace.Input, workspace.Output} {
		files, more, err := ws.Files(folder, shownFiles)
		if err != nil {
			// The folder is a link out of the workspace: nothing to show.
			if errors.Is(err, workspace.ErrOutside) {
				continue
			}
			a.fail(w, r, "list files", err)
			return
		}
		out.More += more
		for _, f := range files {
			if !strings.HasPrefix(f.Name, folder+"/") {
				continue // the folder is a link to another one (logs/, say)
			}
			out.Files = append(out.Files, fileView{Path: f.Name, Size: f.Size, ModifiedAt: f.ModTime.UTC(), URL: fileURL(task.ID, f.Name)})
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// fileURL is where the workspace file rel of task id downloads.
func fileURL(id int64, rel string) string {
	parts := strings.Split(rel, "/")
	for i, p := range parts {
		parts[i] = url.PathEscape(p)
	}
	return "/api/tasks/" + strconv.FormatInt(id, 10) + "/files/" + strings.Join(parts, "/")
}

// download answers GET /api/tasks/{id}/files/{folder}/{path...}: the
// content of a regular file of the task's input/ or output/, as an
// attachment. The file is opened through a root on that folder
// (workspace.OpenIn), so a symlink the agent planted there reaches nothing
// outside it. Anything that is not such a file is 404; a path that is not
// clean (a ".." or "." part, an empty one) is 400.
func (a *API) download(w http.ResponseWriter, r *http.Request) {
	task, ok := a.task(w, r)
	if !ok {
		return
	}
	folder, rel := r.PathValue("folder"), r.PathValue("path")
	missing := fmt.Sprintf("Task %d has no file %s.", task.ID, strconv.Quote(folder+"/"+rel))
	if folder != workspace.Input && folder != workspace.Output {
		writeError(w, http.StatusNotFound, missing+" Files are under input/ and output/.")
		return
	}
	if !fs.ValidPath(rel) || rel == "." || strings.ContainsRune(rel, '\\') {
		writeError(w, http.StatusBadRequest, `A file path names a file inside input/ or output/: no ".." or "." parts, no empty ones.`)
		return
	}
	ws, err := workspace.OpenExisting(task.Workspace)
	if errors.Is(err, fs.ErrNotExist) {
		writeError(w, http.StatusNotFound, missing)
		return
	}
	if err != nil {
		a.fail(w, r, "download", err)
		return
	}
	defer ws.Close()
	f, fi, err := ws.OpenIn(folder, rel)
	switch {
	case err == nil:
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, workspace.ErrOutside), errors.Is(err, workspace.ErrIsDir),
		errors.Is(err, workspace.ErrNotRegular), errors.Is(err, syscall.ENOTDIR), errors.Is(err, syscall.ELOOP):
		a.log.Debug("task API download refused", "task", task.ID, "path", folder+"/"+rel, "err", err)
		writeError(w, http.StatusNotFound, missing)
		return
	default:
		a.fail(w, r, "download", err)
		return
	}
	defer f.Close()
	h := w.Header()
	h.Set("Content-Type", contentType(rel))
	h.Set("Content-Disposition", disposition(path.Base(rel)))
	h.Set("X-Content-Type-Options", "nosniff")
	// Never run as a page of this origin, whatever the agent wrote.
	h.Set("Content-Security-Policy", "sandbox")
	h.Set("Cache-Control", "no-store")
	http.ServeContent(w, r, "", fi.ModTime(), f)
}

// contentType is the type of a file by its extension, or
// application/octet-stream. The agent chose the name: only the system's
// table of types can come out, never a part of the name.
func contentType(name string) string {
	if t := mime.TypeByExtension(path.Ext(name)); t != "" {
		return t
	}
	return "application/octet-stream"
}

// disposition is the Content-Disposition of a download named name. The
// name is quoted, or RFC 2231-encoded when it holds anything but printable
// ASCII, so no character of it (a CR, an LF, a quote) can end the header
// or start another.
func disposition(name string) string {
	if v := mime.FormatMediaType("attachment", map[string]string{"filename": name}); v != "" {
		return v
	}
	return "attachment"
}
