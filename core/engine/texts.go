package engine

import (
	"bytes"
	"embed"
	"fmt"
	"strings"
	"text/template"

	"github.com/baton-bot/baton/core/catalog"
)

//go:embed prompts
var promptFS embed.FS

// texts are the prompts of one locale and its catalogue, whose engine
// section holds the engine's short messages (core/catalog/*/engine.yaml).
type texts struct {
	system, instruction, user, compact *template.Template
	cat                                *catalog.Texts
}

// loadTexts parses the templates of locale ("en" or "ja") and finds its
// catalogue.
func loadTexts(locale string) (*texts, error) {
	cat, err := catalog.For(locale)
	if err != nil {
		return nil, err
	}
	t := &texts{cat: cat}
	for name, dst := range map[string]**template.Template{"system": &t.system, "instruction": &t.instruction, "user": &t.user, "compact": &t.compact} {
		src, err := promptFS.ReadFile("prompts/" + locale + "/" + name + ".tmpl")
		if err != nil {
			return nil, err
		}
		tpl, err := template.New(name).Option("missingkey=error").Parse(string(src))
		if err != nil {
			return nil, fmt.Errorf("prompt %s/%s: %w", locale, name, err)
		}
		*dst = tpl
	}
	return t, nil
}

// msg returns the engine message key ("engine."+key in the catalogue); a
// key the locale lacks falls back to English, then to the key itself.
func (t *texts) msg(key string) string { return t.cat.Text("engine." + key) }

// fill returns message key with each {name} replaced by vars[name].
func (t *texts) fill(key string, vars map[string]string) string {
	pairs := make([]string, 0, 2*len(vars))
	for k, v := range vars {
		pairs = append(pairs, k, v)
	}
	return t.cat.Fill("engine."+key, pairs...)
}

func execute(t *template.Template, data any) (string, error) {
	var b bytes.Buffer
	if err := t.Execute(&b, data); err != nil {
		return "", fmt.Errorf("render prompt %s: %w", t.Name(), err)
	}
	return strings.TrimSpace(b.String()), nil
}
