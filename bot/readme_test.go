package main

import (
	"flag"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

var updateReadme = flag.Bool("update", false, "rewrite the README's configuration reference from configs/baton.yaml")

const (
	readmePath    = "../README.md"
	referenceOpen = "<!-- config-reference: generated from configs/baton.yaml by `go test ./bot -run TestReadmeConfigReference -update` -->"
	referenceEnd  = "<!-- end of config-reference -->"
)

// TestReadmeConfigReference: the README's configuration reference lists
// every key of the config struct, no other, each with the variables that
// set it (envVars; TestEnvEveryScalarKey shows each works), the default and
// the meaning the example config gives it (the table is generated from the
// example; -update rewrites it).
func TestReadmeConfigReference(t *testing.T) {
	root := exampleConfig(t)
	var rows []referenceRow
	exampleLeaves(root.Content[0], "", &rows)

	var listed []string
	for _, r := range rows {
		listed = append(listed, r.key)
	}
	want := leafKeys(reflect.TypeOf(Config{}), "")
	if len(want) < 50 {
		t.Fatalf("only %d leaf keys found by reflection; the walk is broken", len(want))
	}
	for _, k := range want {
		if !slices.Contains(listed, k) {
			t.Errorf("config key %s is missing from %s, hence from the README's reference", k, examplePath)
		}
	}
	for _, k := range listed {
		if !slices.Contains(want, k) {
			t.Errorf("%s has key %s, which the config struct does not know", examplePath, k)
		}
	}

	table := referenceTable(rows)
	readme, err := os.ReadFile(readmePath)
	if err != nil {
		t.Fatal(err)
	}
	text := string(readme)
	start := strings.Index(text, referenceOpen)
	end := strings.Index(text, referenceEnd)
	if start < 0 || end < start {
		t.Fatalf("%s has no configuration reference between\n%s\nand\n%s", readmePath, referenceOpen, referenceEnd)
	}
	start += len(referenceOpen) + 1
	if got := text[start:end]; got != table {
		if *updateReadme {
			text = text[:start] + table + text[end:]
			if err := os.WriteFile(readmePath, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
			return
		}
		t.Errorf("the README's configuration reference is out of date with %s; run\n\tgo test ./bot -run TestReadmeConfigReference -update\nwant:\n%s\ngot:\n%s", examplePath, table, got)
	}
}

// referenceRow is one key of the example config.
type referenceRow struct {
	key, value, meaning string
}

// exampleLeaves collects the keys of a YAML mapping that hold values, with
// the value as written and the comment beside it.
func exampleLeaves(n *yaml.Node, prefix string, out *[]referenceRow) {
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		name := prefix + k.Value
		if v.Kind == yaml.MappingNode && len(v.Content) > 0 {
			exampleLeaves(v, name+".", out)
			continue
		}
		value := v.Value
		switch {
		case v.Kind == yaml.SequenceNode && len(v.Content) == 0:
			value = "[]"
		case v.Kind == yaml.MappingNode:
			value = "{}"
		case value == "":
			value = `""`
		}
		comment := v.LineComment
		if comment == "" {
			comment = k.LineComment
		}
		*out = append(*out, referenceRow{key: name, value: value, meaning: strings.TrimSpace(strings.TrimPrefix(comment, "#"))})
	}
}

// leafKeys returns the dotted yaml keys of t that hold values.
func leafKeys(t reflect.Type, prefix string) []string {
	var keys []string
	for i := range t.NumField() {
		f := t.Field(i)
		name := yamlName(f)
		switch {
		case name == "":
		case f.Type.Kind() == reflect.Struct:
			keys = append(keys, leafKeys(f.Type, prefix+name+".")...)
		default:
			keys = append(keys, prefix+name)
		}
	}
	return keys
}

// referenceTable renders rows as a Markdown table.
func referenceTable(rows []referenceRow) string {
	cell := func(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
	var b strings.Builder
	b.WriteString("| key | environment | default | meaning |\n|---|---|---|---|\n")
	for _, r := range rows {
		vars := "file only"
		if names := envVars(r.key); len(names) > 0 {
			vars = "`" + strings.Join(names, "`, `") + "`"
		}
		b.WriteString("| `" + r.key + "` | " + vars + " | `" + cell(r.value) + "` | " + cell(r.meaning) + " |\n")
	}
	return b.String()
}
