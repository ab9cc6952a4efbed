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
func (Checklist) Description() string {
	return "Keep a named checklist that every following step sees in its prompt. action=set replaces the " +
		"items (items keep their ticks when their text is unchanged); check and uncheck tick items given by " +
		"text or by number (\"1\" is the first); show prints a checklist, or all of them without a name."
}

// Schema implements Tool.
func (Checklist) Schema() json.RawMessage {
	return json.RawMessage(`{"type":"object","properties":{` +
		`"action":{"type":"string","enum":["set","check","uncheck","show"]},` +
		`"name":{"type":"string","description":"checklist name: letters, digits, . _ - (e.g. plan)"},` +
		`"items":{"type":"array","items":{"type":"string"},"description":"set: the items; check/uncheck: item texts or numbers"}},` +
		`"required":["action"],"additionalProperties":false}`)
}

// Call implements Tool.
func (t Checklist) Call(ctx context.Context, env *Env, raw json.RawMessage) Result {
	var a checklistArgs
	if err := decode(raw, &a); err != nil {
		return failure(t.Name(), err)
	}
	text, err := t.apply(env.WS, a)
	if err != nil {
		return failure(t.Name(), err)
	}
	return Result{Text: text}
}

func (t Checklist) apply(ws *workspace.Workspace, a checklistArgs) (string, error) {
	if a.Action == "show" && a.Name == "" {
		s, err := LoadChecklists(ws)
		if s == "" && err == nil {
			s = "No checklists yet."
		}
		return s, err
	}
	if !checklistName.MatchString(a.Name) {
		return "", fmt.Errorf("name %q is invalid: use 1-64 letters, digits, '.', '_' or '-'", a.Name)
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
			return "", fmt.Errorf("no checklist named %s; create it with action=set", a.Name)
		}
		return renderChecklist(cl), nil
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
			return "", errors.New("set needs at least one non-empty item")
		}
	case "check", "uncheck":
		if !exists {
			return "", fmt.Errorf("no checklist named %s; create it with action=set", a.Name)
		}
		if len(a.Items) == 0 {
			return "", fmt.Errorf("%s needs items (texts or numbers)", a.Action)
		}
		for _, s := range a.Items {
			i, err := findItem(cl, s)
			if err != nil {
				return "", err
			}
			cl.Items[i].Done = a.Action == "check"
		}
	default:
		return "", fmt.Errorf("action %q is unknown: use set, check, uncheck or show", a.Action)
	}
	if err := writeChecklist(ws, p, cl); err != nil {
		return "", err
	}
	return renderChecklist(cl), nil
}

func findItem(cl checklistFile, s string) (int, error) {
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
	return 0, fmt.Errorf("no item %q in checklist %s; its items are:\n%s", s, cl.Name, renderChecklist(cl))
}

func readChecklist(ws *workspace.Workspace, rel string) (checklistFile, error) {
	var cl checklistFile
	b, err := ws.ReadFile(rel)
	if err != nil {
		return cl, err
	}
	if err := json.Unmarshal(b, &cl); err != nil {
		return cl, fmt.Errorf("checklist %s is corrupt: %w", path.Base(rel), err)
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

func renderChecklist(cl checklistFile) string {
	done := 0
	for _, it := range cl.Items {
		if it.Done {
			done++
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "### Checklist: %s (%d/%d done)\n", cl.Name, done, len(cl.Items))
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
// logs/checklists/ as Markdown, sorted by name, for injection into a
// movement's prompt. It returns "" when there are none. A corrupt file is
// skipped and reported in the error while the others are still rendered.
func LoadChecklists(ws *workspace.Workspace) (string, error) {
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
		parts = append(parts, renderChecklist(cl))
	}
	out := strings.Join(parts, "\n")
	if len(errs) > 0 {
		return out, fmt.Errorf("load checklists: %w", errors.Join(errs...))
	}
	return out, nil
}
