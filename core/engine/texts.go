package engine

import (
	"bytes"
	"embed"
	"fmt"
	"strings"
	"text/template"

	"gopkg.in/yaml.v3"
)

//go:embed prompts
var promptFS embed.FS

// texts are the prompts and messages of one locale.
type texts struct {
	system, instruction, user, compact *template.Template
	msgs                               map[string]string
}

// loadTexts parses the templates and messages of locale ("en" or "ja").
func loadTexts(locale string) (*texts, error) {
	if locale != "en" && locale != "ja" {
		return nil, fmt.Errorf("locale %q: want en or ja", locale)
	}
	t := &texts{}
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
	src, err := promptFS.ReadFile("prompts/" + locale + "/messages.yaml")
	if err != nil {
		return nil, err
	}
	if err := yaml.Unmarshal(src, &t.msgs); err != nil {
		return nil, fmt.Errorf("messages %s: %w", locale, err)
	}
	return t, nil
}

// msg returns the message key; a missing key is a programming error.
func (t *texts) msg(key string) string {
	s, ok := t.msgs[key]
	if !ok {
		panic("engine: no message " + key)
	}
	return s
}

// fill returns message key with each {name} replaced by vars[name].
func (t *texts) fill(key string, vars map[string]string) string {
	s := t.msg(key)
	pairs := make([]string, 0, 2*len(vars))
	for k, v := range vars {
		pairs = append(pairs, "{"+k+"}", v)
	}
	return strings.NewReplacer(pairs...).Replace(s)
}

func execute(t *template.Template, data any) (string, error) {
	var b bytes.Buffer
	if err := t.Execute(&b, data); err != nil {
		return "", fmt.Errorf("render prompt %s: %w", t.Name(), err)
	}
	return strings.TrimSpace(b.String()), nil
}
