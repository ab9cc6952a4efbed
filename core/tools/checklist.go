package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/baton-bot/baton/core/catalog"
	"github.com/baton-bot/baton/core/workspace"
)

// checklistDir is where checklists live; the engine injects them into
// every movement's prompt (LoadChecklists).
const checklistDir = "logs/checklists"

// Checklist keeps named checklists in logs/checklists/<name>.json — the
// only tool that writes under logs/, because the engine reads these files
// back into the prompt.
type Checklist struct{}

// checklistMu serialises read-modify-write of checklist files within the
// process.
var checklistMu sync.Mutex

type checklistArgs struct {
	Action string   `json:"action"`
	Name   string   `json:"name"`
	Items  []string `json:"items"`
}

type checklistItem struct {
	Text string `json:"text"`
	Done bool   `json:"done"`
}

type checklistFile struct {
	Name  string          `json:"name"`
	Items []checklistItem `json:"items"`
}

var checklistName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// Name implements Tool.
func (Checklist) Name() string { return "Checklist" }

// Description implements Tool.
func (Checklist) Description(tx *catalog.Texts) string { return tx.Text("tools.checklist.description") }

// Schema implements Tool.
func (Checklist) Schema(tx *catalog.Texts) json.RawMessage {
	return schema(tx, "checklist", `{"type":"object","properties":{`+
		`"action":{"type":"string","enum":["set","check","uncheck","show"]},`+
		`"name":{"type":"string","description":$name},`+
		`"items":{"type":"array","items":{"type":"string"},"description":$items}},`+
		`"required":["action"],"additionalProperties":false}`)
}

// Call implements Tool.
func (t Checklist) Call(ctx context.Context, env *Env, raw json.RawMessage) Result {
	var a checklistArgs
	if err := decode(raw, &a); err != nil {
		return env.fail(t.Name(), "", err)
	}
	text, err := t.apply(env, a)
	if err != nil {
		rel := checklistDir
		if a.Name != "" {
			rel += "/" + a.Name + ".json"
		}
		return env.fail(t.Name(), rel, err)
	}
	return Result{Text: text}
}

func (t Checklist) apply(env *Env, a checklistArgs) (string, error) {
	ws, tx := env.WS, env.texts()
	if a.Action == "show" && a.Name == "" {
		s, err := LoadChecklists(ws, tx)
		if s == "" && err == nil {
			s = tx.Text("tools.checklist.none")
		}
		return s, err
	}
	if !checklistName.MatchString(a.Name) {
		return "", fault("tools.checklist.bad_name", "name", strconv.Quote(a.Name))
	}
	p := checklistDir + "/" + a.Name + ".json"
	if _, err := ws.Resolve(p); err != nil {
		return "", err
	}
	checklistMu.Lock()
	defer checklistMu.Unlock()
	cl, err := readChecklist(ws, p)
	exists := err == nil
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	cl.Name = a.Name
	switch a.Action {
	case "show":
		if !exists {
			return "", fault("tools.checklist.no_such", "name", a.Name)
		}
		return renderChecklist(tx, cl), nil
	case "set":
		done := map[string]bool{}
		for _, it := range cl.Items {
			done[it.Text] = it.Done
		}
		cl.Items = nil
		for _, s := range a.Items {
			if s = strings.TrimSpace(s); s != "" {
				cl.Items = append(cl.Items, checklistItem{Text: s, Done: done[s]})
			}
		}
		if len(cl.Items) == 0 {
			return "", fault("tools.checklist.set_empty")
		}
	case "check", "uncheck":
		if !exists {
			return "", fault("tools.checklist.no_such", "name", a.Name)
		}
		if len(a.Items) == 0 {
			return "", fault("tools.checklist.needs_items", "action", a.Action)
		}
		for _, s := range a.Items {
			i, err := findItem(tx, cl, s)
			if err != nil {
				return "", err
			}
			cl.Items[i].Done = a.Action == "check"
		}
	default:
		return "", fault("tools.checklist.bad_action", "action", strconv.Quote(a.Action))
	}
	if err := writeChecklist(ws, p, cl); err != nil {
		return "", err
	}
	return renderChecklist(tx, cl), nil
}

func findItem(tx *catalog.Texts, cl checklistFile, s string) (int, error) {
	s = strings.TrimSpace(s)
	for i, it := range cl.Items {
		if it.Text == s {
			return i, nil
		}
	}
	if n, err := strconv.Atoi(s); err == nil && n >= 1 && n <= len(cl.Items) {
		return n - 1, nil
	}
	for i, it := range cl.Items {
		if strings.EqualFold(it.Text, s) {
			return i, nil
		}
	}
	return 0, fault("tools.checklist.no_item", "item", strconv.Quote(s), "name", cl.Name, "items", renderChecklist(tx, cl))
}

func readChecklist(ws *workspace.Workspace, rel string) (checklistFile, error) {
	var cl checklistFile
	b, err := ws.ReadFile(rel)
	if err != nil {
		return cl, err
	}
	if err := json.Unmarshal(b, &cl); err != nil {
		return cl, &textError{key: "tools.checklist.corrupt", vars: []string{"name", path.Base(rel), "err", err.Error()}}
	}
	return cl, nil
}

// writeChecklist replaces the file atomically so a crash never leaves half a
// checklist for the prompt.
func writeChecklist(ws *workspace.Workspace, rel string, cl checklistFile) error {
	b, err := json.MarshalIndent(cl, "", "  ")
	if err != nil {
		return err
	}
	if err := ws.WriteLog(rel, b); err != nil {
		return fmt.Errorf("save checklist: %w", err)
	}
	return nil
}

func renderChecklist(tx *catalog.Texts, cl checklistFile) string {
	done := 0
	for _, it := range cl.Items {
		if it.Done {
			done++
		}
	}
	var b strings.Builder
	b.WriteString(tx.Fill("tools.checklist.header", "name", cl.Name, "done", itoa(done), "total", itoa(len(cl.Items))) + "\n")
	for _, it := range cl.Items {
		mark := " "
		if it.Done {
			mark = "x"
		}
		fmt.Fprintf(&b, "- [%s] %s\n", mark, it.Text)
	}
	return b.String()
}

// LoadChecklists renders every checklist in the workspace's
// logs/checklists/ as Markdown in tx's locale (nil: English), sorted by
// name, for injection into a movement's prompt. It returns "" when there
// are none. A corrupt file is skipped and reported in the error while the
// others are still rendered.
func LoadChecklists(ws *workspace.Workspace, tx *catalog.Texts) (string, error) {
	entries, err := ws.ReadDir(checklistDir)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("load checklists: %w", err)
	}
	var names []string
	for _, e := range entries {
		if e.Type().IsRegular() && strings.HasSuffix(e.Name(), ".json") && !strings.HasPrefix(e.Name(), ".") {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	var parts []string
	var errs []error
	for _, n := range names {
		cl, err := readChecklist(ws, checklistDir+"/"+n)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if cl.Name == "" {
			cl.Name = strings.TrimSuffix(n, ".json")
		}
		parts = append(parts, renderChecklist(tx, cl))
	}
	out := strings.Join(parts, "\n")
	if len(errs) > 0 {
		return out, fmt.Errorf("load checklists: %w", errors.Join(errs...))
	}
	return out, nil
}
