// Package catalog holds the words Baton's model and people read — the
// engine's short messages, the tools' descriptions, parameters, notes and
// errors, and the bot's chat messages — as one catalogue per locale (en,
// ja), embedded from en/*.yaml and ja/*.yaml.
//
// Each YAML file is a section: its keys are prefixed with the file's name
// ("engine.reminder" comes from engine.yaml), and nested maps join their
// keys with dots ("tools.read.description"). Both locales hold the same
// keys (a test checks it). A lookup never panics: a key missing from a
// locale falls back to English, and a key missing from English too is
// returned as itself, so that a slip shows as a key in the text rather
// than as a crash.
//
// The engine's prompt templates stay with the engine (core/engine/prompts);
// everything shorter lives here.
package catalog

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"
	"sync"

	"gopkg.in/yaml.v3"
)

//go:embed en ja
var files embed.FS

// Locales lists the locales there are catalogues for; English first, as
// the fallback.
var Locales = []string{"en", "ja"}

// Texts is the catalogue of one locale. The nil *Texts is English. A Texts
// is immutable and safe for concurrent use.
type Texts struct {
	locale string
	m      map[string]string // this locale's texts
	en     map[string]string // English, the fallback
}

// loaded parses every locale once.
var loaded = sync.OnceValues(func() (map[string]map[string]string, error) {
	out := make(map[string]map[string]string, len(Locales))
	for _, loc := range Locales {
		m, err := parse(files, loc)
		if err != nil {
			return nil, err
		}
		out[loc] = m
	}
	return out, nil
})

// parse reads the YAML sections of one locale into flat dotted keys.
func parse(fsys fs.FS, locale string) (map[string]string, error) {
	names, err := fs.Glob(fsys, locale+"/*.yaml")
	if err != nil {
		return nil, err
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("catalog %s: no texts", locale)
	}
	sort.Strings(names)
	m := map[string]string{}
	for _, name := range names {
		src, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		var tree map[string]any
		if err := yaml.Unmarshal(src, &tree); err != nil {
			return nil, fmt.Errorf("catalog %s: %w", name, err)
		}
		if err := flatten(m, strings.TrimSuffix(path.Base(name), ".yaml"), tree); err != nil {
			return nil, fmt.Errorf("catalog %s: %w", name, err)
		}
	}
	return m, nil
}

func flatten(dst map[string]string, prefix string, tree map[string]any) error {
	for k, v := range tree {
		key := prefix + "." + k
		switch v := v.(type) {
		case string:
			dst[key] = v
		case map[string]any:
			if err := flatten(dst, key, v); err != nil {
				return err
			}
		default:
			return fmt.Errorf("%s: want a text or a map, got %T", key, v)
		}
	}
	return nil
}

// For returns the catalogue of locale ("en" or "ja").
func For(locale string) (*Texts, error) {
	all, err := loaded()
	if err != nil {
		return nil, err
	}
	m, ok := all[locale]
	if !ok {
		return nil, fmt.Errorf("locale %q: want one of %s", locale, strings.Join(Locales, ", "))
	}
	return &Texts{locale: locale, m: m, en: all["en"]}, nil
}

// Or returns the catalogue of locale, or English when there is none for
// it, for callers whose locale was validated at start.
func Or(locale string) *Texts {
	t, err := For(locale)
	if err != nil {
		return nil
	}
	return t
}

// own returns this locale's texts and English's; the nil Texts is English.
func (t *Texts) own() (m, en map[string]string) {
	if t == nil {
		all, _ := loaded() // nil on a broken catalogue: every lookup is its key
		return all["en"], all["en"]
	}
	return t.m, t.en
}

// Locale returns the catalogue's locale.
func (t *Texts) Locale() string {
	if t == nil {
		return "en"
	}
	return t.locale
}

// Text returns the text of key: this locale's, else English, else the key
// itself.
func (t *Texts) Text(key string) string {
	m, en := t.own()
	if s, ok := m[key]; ok {
		return s
	}
	if s, ok := en[key]; ok {
		return s
	}
	return key
}

// Fill returns the text of key with each {name} replaced by its value;
// vars are pairs: name, value, name, value, … (a last name without a value
// is ignored).
func (t *Texts) Fill(key string, vars ...string) string {
	s := t.Text(key)
	if len(vars) < 2 {
		return s
	}
	pairs := make([]string, 0, len(vars)&^1)
	for i := 0; i+1 < len(vars); i += 2 {
		pairs = append(pairs, "{"+vars[i]+"}", vars[i+1])
	}
	return strings.NewReplacer(pairs...).Replace(s)
}

// Has reports whether the locale's own catalogue holds key, without the
// English fallback.
func (t *Texts) Has(key string) bool {
	m, _ := t.own()
	_, ok := m[key]
	return ok
}

// Keys lists the keys of the locale's own catalogue, sorted.
func (t *Texts) Keys() []string {
	m, _ := t.own()
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
