package piece

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// Error is one problem in a piece file. Line is 1-based; 0 when the problem
// belongs to the file as a whole.
type Error struct {
	File string
	Line int
	Msg  string
}

// Error formats the problem as "file:line: message" (or "file: message"
// without a line), the form editors and terminals link to.
func (e *Error) Error() string {
	if e.Line <= 0 {
		return e.File + ": " + e.Msg
	}
	return e.File + ":" + strconv.Itoa(e.Line) + ": " + e.Msg
}

// Parse reads the piece in src. file is the piece's path inside fsys: it
// names the piece in errors and becomes Piece.Source, and persona .md paths
// resolve relative to its directory in fsys (fsys may be nil when the piece
// uses no persona files). rules say which tools exist and whether a
// movement may ask for the network.
//
// On failure Parse returns a nil *Piece and every problem found, each an
// *Error, joined with errors.Join (use errors.As, or Unwrap() []error, to
// list them). Errors are sorted by line.
func Parse(src []byte, file string, fsys fs.FS, rules Rules) (*Piece, error) {
	pc, _, err := parse(src, file, file, fsys, rules)
	return pc, err
}

// parse is Parse with the name shown to people (display) separate from the
// file's path inside fsys. It also returns the line of the piece's name.
func parse(src []byte, display, fsPath string, fsys fs.FS, rules Rules) (pc *Piece, nameLine int, err error) {
	defer func() {
		// yaml.v3 has panicked on hostile input in the past; a piece file
		// must never take the process down.
		if r := recover(); r != nil {
			pc, nameLine, err = nil, 0, &Error{File: display, Msg: fmt.Sprintf("cannot parse YAML: %v", r)}
		}
	}()
	p := &parser{file: display, dir: path.Dir(fsPath), fsys: fsys, known: rules.KnownTool, noNetwork: rules.NoNetwork}
	root, err := p.document(src)
	if err != nil {
		return nil, 0, err
	}
	pc, nameLine = p.piece(root)
	if len(p.errs) > 0 {
		slices.SortStableFunc(p.errs, func(a, b *Error) int { return cmp.Compare(a.Line, b.Line) })
		errs := make([]error, len(p.errs))
		for i, e := range p.errs {
			errs[i] = e
		}
		return nil, 0, errors.Join(errs...)
	}
	return pc, nameLine, nil
}

type parser struct {
	file      string
	dir       string // directory of the piece file in fsys
	fsys      fs.FS
	known     func(string) bool
	noNetwork string // Rules.NoNetwork
	errs      []*Error
}

func (p *parser) errorf(line int, format string, args ...any) {
	p.errs = append(p.errs, &Error{File: p.file, Line: line, Msg: fmt.Sprintf(format, args...)})
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// document decodes src into its root node, which is nil for an empty file.
func (p *parser) document(src []byte) (*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(src))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, p.yamlError(err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, &Error{File: p.file, Line: extra.Line, Msg: "a piece file holds one YAML document; found another"}
	} else if !errors.Is(err, io.EOF) {
		return nil, p.yamlError(err)
	}
	if len(doc.Content) == 0 {
		return nil, nil
	}
	return doc.Content[0], nil
}

func (p *parser) yamlError(err error) *Error {
	msg := err.Error()
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		n, _ := strconv.Atoi(m[1])
		return &Error{File: p.file, Line: n, Msg: "invalid YAML: " + m[2]}
	}
	return &Error{File: p.file, Msg: "invalid YAML: " + strings.TrimPrefix(msg, "yaml: ")}
}

// deref follows aliases to the node they name.
func deref(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 100; i++ {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.Tag == "!!null"
}

// fields walks a mapping node, calling set for each known key and reporting
// unknown and repeated keys. where names the mapping in messages ("" for the
// top level).
func (p *parser) fields(n *yaml.Node, where string, set map[string]func(k, v *yaml.Node)) {
	n = deref(n)
	if n.Kind != yaml.MappingNode {
		p.errorf(n.Line, "%swant a mapping of fields", prefix(where))
		return
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := deref(n.Content[i]), deref(n.Content[i+1])
		if k.Kind != yaml.ScalarNode {
			p.errorf(k.Line, "%sa field name must be a plain word", prefix(where))
			continue
		}
		if first, ok := seen[k.Value]; ok {
			p.errorf(k.Line, "%sfield %q repeated (first at line %d)", prefix(where), k.Value, first)
			continue
		}
		seen[k.Value] = k.Line
		f, ok := set[k.Value]
		if !ok {
			p.errorf(k.Line, "%sunknown field %q", prefix(where), k.Value)
			continue
		}
		f(k, v)
	}
}

func prefix(where string) string {
	if where == "" {
		return ""
	}
	return where + ": "
}

// str decodes a scalar as a string. Null yields "" and ok.
func (p *parser) str(v *yaml.Node, field string) (string, bool) {
	if isNull(v) {
		return "", true
	}
	if v.Kind != yaml.ScalarNode {
		p.errorf(v.Line, "%s: want a string", field)
		return "", false
	}
	return v.Value, true
}

func (p *parser) integer(v *yaml.Node, field string) (int, bool) {
	var i int
	if v.Kind != yaml.ScalarNode || v.Tag != "!!int" || v.Decode(&i) != nil {
		p.errorf(v.Line, "%s: want a whole number, got %s", field, describe(v))
		return 0, false
	}
	return i, true
}

func (p *parser) boolean(v *yaml.Node, field string) bool {
	var b bool
	if v.Kind != yaml.ScalarNode || v.Tag != "!!bool" || v.Decode(&b) != nil {
		p.errorf(v.Line, "%s: want true or false, got %s", field, describe(v))
		return false
	}
	return b
}

// item is a string from a YAML list with its line.
type item struct {
	val  string
	line int
}

func (p *parser) list(v *yaml.Node, field string) []item {
	if isNull(v) {
		return nil
	}
	if v.Kind != yaml.SequenceNode {
		p.errorf(v.Line, "%s: want a list, got %s", field, describe(v))
		return nil
	}
	var out []item
	for _, c := range v.Content {
		c = deref(c)
		if c.Kind != yaml.ScalarNode || isNull(c) {
			p.errorf(c.Line, "%s: want a name, got %s", field, describe(c))
			continue
		}
		out = append(out, item{c.Value, c.Line})
	}
	return out
}

func describe(v *yaml.Node) string {
	switch v.Kind {
	case yaml.ScalarNode:
		return strconv.Quote(v.Value)
	case yaml.SequenceNode:
		return "a list"
	case yaml.MappingNode:
		return "a mapping"
	}
	return "nothing"
}

// rawText is a Text as written, with the line of each value so that persona
// resolution can point at the offending one.
type rawText struct {
	plain bool // written as a plain string, stored under "en"
	vals  Text
	lines map[string]int
}

func (p *parser) text(v *yaml.Node, field string) (rawText, bool) {
	rt := rawText{vals: Text{}, lines: map[string]int{}}
	switch {
	case isNull(v):
		return rawText{}, true
	case v.Kind == yaml.ScalarNode:
		rt.plain = true
		rt.vals["en"], rt.lines["en"] = v.Value, v.Line
		return rt, true
	case v.Kind != yaml.MappingNode:
		p.errorf(v.Line, "%s: want text or a map of text by locale (en, ja), got %s", field, describe(v))
		return rawText{}, false
	}
	ok := true
	seen := map[string]bool{}
	for i := 0; i+1 < len(v.Content); i += 2 {
		k, val := deref(v.Content[i]), deref(v.Content[i+1])
		if k.Kind != yaml.ScalarNode || !slices.Contains(locales, k.Value) {
			p.errorf(k.Line, "%s: unknown locale %s (want en or ja)", field, describe(k))
			ok = false
			continue
		}
		if seen[k.Value] {
			p.errorf(k.Line, "%s: locale %q repeated", field, k.Value)
			ok = false
			continue
		}
		seen[k.Value] = true
		if val.Kind != yaml.ScalarNode {
			p.errorf(val.Line, "%s.%s: want text, got %s", field, k.Value, describe(val))
			ok = false
			continue
		}
		rt.vals[k.Value], rt.lines[k.Value] = val.Value, val.Line
	}
	return rt, ok
}

// nameRE is what a piece, movement or persona name may look like. It is also
// the shape of a value that "looks like a name" in a persona field.
var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// rawMovement is a movement as written, with the lines validation needs.
type rawMovement struct {
	Movement
	line        int // of the list item
	nameLine    int
	next        []item
	defaultLine int
	persona     rawText
}

func (p *parser) piece(root *yaml.Node) (*Piece, int) {
	if root == nil {
		p.errorf(0, "empty piece: want name and movements")
		return nil, 0
	}
	root = deref(root)
	pc := &Piece{Source: p.file, MaxMovements: DefaultMaxMovements}
	var (
		nameLine, initLine, movementsLine int
		sawMovements                      bool
		personas                          = map[string]rawText{}
		personaLines                      = map[string]int{}
		raws                              []*rawMovement
	)
	p.fields(root, "", map[string]func(k, v *yaml.Node){
		"name": func(k, v *yaml.Node) {
			nameLine = v.Line
			pc.Name, _ = p.str(v, "name")
		},
		"description": func(k, v *yaml.Node) {
			rt, _ := p.text(v, "description")
			pc.Description = rt.vals
		},
		"initial_movement": func(k, v *yaml.Node) {
			initLine = v.Line
			pc.InitialMovement, _ = p.str(v, "initial_movement")
		},
		"max_movements": func(k, v *yaml.Node) {
			if n, ok := p.integer(v, "max_movements"); ok {
				if n < 1 {
					p.errorf(v.Line, "max_movements must be at least 1, got %d", n)
				}
				pc.MaxMovements = n
			}
		},
		"personas": func(k, v *yaml.Node) {
			p.personas(v, personas, personaLines)
		},
		"movements": func(k, v *yaml.Node) {
			sawMovements = true
			movementsLine = k.Line
			if isNull(v) {
				return
			}
			if v.Kind != yaml.SequenceNode {
				p.errorf(v.Line, "movements: want a list of movements, got %s", describe(v))
				return
			}
			for _, c := range v.Content {
				raws = append(raws, p.movement(deref(c)))
			}
		},
	})
	if root.Kind != yaml.MappingNode {
		return nil, 0
	}
	switch {
	case nameLine == 0:
		p.errorf(root.Line, "missing field \"name\"")
	case !nameRE.MatchString(pc.Name):
		p.errorf(nameLine, "piece name %q: use letters, digits, '.', '_' or '-'", pc.Name)
	}
	if !sawMovements {
		p.errorf(root.Line, "missing field \"movements\"")
	} else if len(raws) == 0 {
		p.errorf(movementsLine, "movements: a piece needs at least one movement")
	}

	resolved := p.resolvePersonas(personas)
	for _, m := range raws {
		m.Persona = p.movementPersona(m, personas, resolved)
	}
	p.graph(pc, raws, initLine)
	pc.Movements = make([]Movement, len(raws))
	for i, m := range raws {
		pc.Movements[i] = m.Movement
	}
	return pc, nameLine
}

func (p *parser) personas(v *yaml.Node, out map[string]rawText, lines map[string]int) {
	if isNull(v) {
		return
	}
	if v.Kind != yaml.MappingNode {
		p.errorf(v.Line, "personas: want a mapping of name to text or .md path, got %s", describe(v))
		return
	}
	for i := 0; i+1 < len(v.Content); i += 2 {
		k, val := deref(v.Content[i]), deref(v.Content[i+1])
		if k.Kind != yaml.ScalarNode || !nameRE.MatchString(k.Value) {
			p.errorf(k.Line, "personas: name %s: use letters, digits, '.', '_' or '-'", describe(k))
			continue
		}
		if first, ok := lines[k.Value]; ok {
			p.errorf(k.Line, "personas: duplicate persona %q (first at line %d)", k.Value, first)
			continue
		}
		lines[k.Value] = k.Line
		if rt, ok := p.text(val, "personas."+k.Value); ok {
			out[k.Value] = rt
		}
	}
}

func (p *parser) movement(n *yaml.Node) *rawMovement {
	m := &rawMovement{line: n.Line}
	m.MaxIterations = DefaultMaxIterations
	where := "movement"
	// The name is needed to label every other error, so find it first.
	if n.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			if k := deref(n.Content[i]); k.Kind == yaml.ScalarNode && k.Value == "name" {
				if v := deref(n.Content[i+1]); v.Kind == yaml.ScalarNode && !isNull(v) {
					where = fmt.Sprintf("movement %q", v.Value)
				}
				break
			}
		}
	}
	p.fields(n, where, map[string]func(k, v *yaml.Node){
		"name": func(k, v *yaml.Node) {
			m.nameLine = v.Line
			m.Name, _ = p.str(v, where+": name")
		},
		"persona": func(k, v *yaml.Node) {
			m.persona, _ = p.text(v, where+": persona")
		},
		"instruction": func(k, v *yaml.Node) {
			rt, _ := p.text(v, where+": instruction")
			m.Instruction = rt.vals
		},
		"tools": func(k, v *yaml.Node) {
			seen := map[string]bool{}
			for _, t := range p.list(v, where+": tools") {
				switch {
				case t.val == "transition":
					p.errorf(t.line, "%s: tool \"transition\" is always offered; do not list it", where)
				case p.known != nil && !p.known(t.val):
					p.errorf(t.line, "%s: unknown tool %q", where, t.val)
				case seen[t.val]:
					p.errorf(t.line, "%s: tool %q listed twice", where, t.val)
				default:
					seen[t.val] = true
					m.Tools = append(m.Tools, t.val)
				}
			}
		},
		"next": func(k, v *yaml.Node) {
			m.next = p.list(v, where+": next")
		},
		"default_next": func(k, v *yaml.Node) {
			m.defaultLine = v.Line
			m.DefaultNext, _ = p.str(v, where+": default_next")
		},
		"max_iterations": func(k, v *yaml.Node) {
			if n, ok := p.integer(v, where+": max_iterations"); ok {
				if n < 1 {
					p.errorf(v.Line, "%s: max_iterations must be at least 1, got %d", where, n)
				}
				m.MaxIterations = n
			}
		},
		"model": func(k, v *yaml.Node) { m.Model, _ = p.str(v, where+": model") },
		"network": func(k, v *yaml.Node) {
			m.Network = p.boolean(v, where+": network")
			if m.Network && p.noNetwork != "" {
				p.errorf(v.Line, "%s: network: true is refused: %s", where, p.noNetwork)
			}
		},
		"verify":      func(k, v *yaml.Node) { m.Verify = p.boolean(v, where+": verify") },
		"git_context": func(k, v *yaml.Node) { m.GitContext = p.boolean(v, where+": git_context") },
	})
	if n.Kind == yaml.MappingNode && m.nameLine == 0 {
		p.errorf(n.Line, "movement without a name")
	}
	return m
}

// graph checks names, next steps and reachability, and fills Next and
// InitialMovement.
func (p *parser) graph(pc *Piece, raws []*rawMovement, initLine int) {
	byName := map[string]*rawMovement{}
	for _, m := range raws {
		if m.nameLine == 0 {
			continue
		}
		switch first, dup := byName[m.Name]; {
		case IsSentinel(m.Name):
			p.errorf(m.nameLine, "movement name %q is reserved for a next step", m.Name)
		case !nameRE.MatchString(m.Name):
			p.errorf(m.nameLine, "movement name %q: use letters, digits, '.', '_' or '-'", m.Name)
		case dup:
			p.errorf(m.nameLine, "duplicate movement name %q (first at line %d)", m.Name, first.nameLine)
		default:
			byName[m.Name] = m
		}
	}
	for _, m := range raws {
		where := fmt.Sprintf("movement %q", m.Name)
		if len(m.next) == 0 && m.nameLine != 0 {
			p.errorf(m.line, "%s: next is empty; list at least one movement or sentinel", where)
		}
		seen := map[string]bool{}
		for _, n := range m.next {
			_, isMovement := byName[n.val]
			switch {
			case seen[n.val]:
				p.errorf(n.line, "%s: next %q listed twice", where, n.val)
				continue
			case !isMovement && !IsSentinel(n.val):
				p.errorf(n.line, "%s: next %q is no movement of this piece nor a sentinel (COMPLETE, ASK, ABORT, WAIT_SUBTASKS)", where, n.val)
			}
			seen[n.val] = true
			m.Next = append(m.Next, n.val)
		}
		if d := m.DefaultNext; d != "" {
			_, isMovement := byName[d]
			switch {
			case !isMovement && !IsSentinel(d):
				p.errorf(m.defaultLine, "%s: default_next %q is no movement of this piece", where, d)
			case !seen[d]:
				p.errorf(m.defaultLine, "%s: default_next %q is not one of its next", where, d)
			}
		}
	}

	if pc.InitialMovement == "" {
		if len(raws) > 0 && raws[0].nameLine != 0 {
			pc.InitialMovement = raws[0].Name
		}
	} else if _, ok := byName[pc.InitialMovement]; !ok {
		p.errorf(initLine, "initial_movement %q is no movement of this piece", pc.InitialMovement)
		return
	}
	if pc.InitialMovement == "" {
		return
	}
	reached := map[string]bool{pc.InitialMovement: true}
	queue := []string{pc.InitialMovement}
	for len(queue) > 0 {
		m := byName[queue[0]]
		queue = queue[1:]
		for _, n := range m.Next {
			if _, ok := byName[n]; ok && !reached[n] {
				reached[n] = true
				queue = append(queue, n)
			}
		}
	}
	for _, m := range raws {
		if byName[m.Name] == m && !reached[m.Name] {
			p.errorf(m.nameLine, "movement %q is unreachable from initial movement %q", m.Name, pc.InitialMovement)
		}
	}
}

// resolvePersonas turns the personas map into text, reading .md files.
func (p *parser) resolvePersonas(personas map[string]rawText) map[string]Text {
	out := make(map[string]Text, len(personas))
	// Sorted so that errors come out in a stable order before the line sort.
	keys := make([]string, 0, len(personas))
	for k := range personas {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		rt := personas[k]
		where := fmt.Sprintf("personas.%s", k)
		if rt.plain {
			out[k] = p.personaValue(rt.vals["en"], rt.lines["en"], where, true)
			continue
		}
		t := Text{}
		for _, loc := range locales {
			if s, ok := rt.vals[loc]; ok {
				if v := p.personaValue(s, rt.lines[loc], where, false)["en"]; v != "" {
					t[loc] = v
				}
			}
		}
		out[k] = t
	}
	return out
}

// movementPersona resolves a movement's persona field.
func (p *parser) movementPersona(m *rawMovement, personas map[string]rawText, resolved map[string]Text) Text {
	rt := m.persona
	if len(rt.vals) == 0 {
		return nil
	}
	where := fmt.Sprintf("movement %q: persona", m.Name)
	lookup := func(s string, line int, siblings bool) Text {
		if _, ok := personas[s]; ok {
			return resolved[s]
		}
		return p.personaValue(s, line, where, siblings)
	}
	if rt.plain {
		return lookup(rt.vals["en"], rt.lines["en"], true)
	}
	t := Text{}
	for _, loc := range locales {
		if s, ok := rt.vals[loc]; ok {
			if v := lookup(s, rt.lines[loc], false).For(loc); v != "" {
				t[loc] = v
			}
		}
	}
	return t
}

// personaValue resolves one persona string that is not a key: a .md path or
// inline text. With siblings, a path's locale variants (name.ja.md) are read
// too. The result holds the text under "en" (and other locales when read
// from siblings).
func (p *parser) personaValue(s string, line int, where string, siblings bool) Text {
	trimmed := strings.TrimSpace(s)
	switch {
	case trimmed == "":
		p.errorf(line, "%s: empty", where)
		return nil
	case strings.HasSuffix(trimmed, ".md") && !strings.ContainsAny(trimmed, " \t\n\r"):
		return p.personaFile(trimmed, line, where, siblings)
	case nameRE.MatchString(trimmed):
		p.errorf(line, "%s %q is a single word but not a key of personas, a .md file or text", where, trimmed)
		return nil
	}
	return Text{"en": s}
}

func (p *parser) personaFile(rel string, line int, where string, siblings bool) Text {
	if path.IsAbs(rel) {
		p.errorf(line, "%s file %q: write the path relative to the piece file", where, rel)
		return nil
	}
	full := path.Join(p.dir, rel)
	if p.fsys == nil || !fs.ValidPath(full) {
		p.errorf(line, "%s file %q is outside the directory the piece was loaded from", where, rel)
		return nil
	}
	body, err := fs.ReadFile(p.fsys, full)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		p.errorf(line, "%s file %q not found", where, rel)
		return nil
	case err != nil:
		p.errorf(line, "%s file %q: %v", where, rel, err)
		return nil
	case strings.TrimSpace(string(body)) == "":
		p.errorf(line, "%s file %q is empty", where, rel)
		return nil
	}
	t := Text{"en": strings.TrimSpace(string(body))}
	if !siblings {
		return t
	}
	base := strings.TrimSuffix(full, ".md")
	for _, loc := range locales[1:] {
		if strings.HasSuffix(base, "."+loc) {
			return t // already a locale variant
		}
	}
	for _, loc := range locales[1:] {
		variant := base + "." + loc + ".md"
		body, err := fs.ReadFile(p.fsys, variant)
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			p.errorf(line, "%s file %q: %v", where, path.Base(variant), err)
		case strings.TrimSpace(string(body)) != "":
			t[loc] = strings.TrimSpace(string(body))
		}
	}
	return t
}
