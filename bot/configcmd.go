package main

import (
	"bytes"
	"context"
	"fmt"
	"reflect"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// showConfig runs `baton config`: the effective configuration as YAML,
// each key with a trailing comment saying where its value came from
// (default, FILE:LINE, environment VAR), secrets and the credentials in
// URLs redacted. A configuration that does not load or does not validate
// is exit 2, after the printout when it loaded.
func (m *Main) showConfig(ctx context.Context, args []string) error {
	var cf commonFlags
	fs := m.flagSet("config", &cf, false)
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := noArgs("config", fs); err != nil {
		return err
	}
	cfg, origins, err := loadConfig(cf.config, m.Env)
	if err != nil {
		return configErr("config", err)
	}
	file, _, _ := configPath(cf.config, m.Env) // loadConfig took it
	out, err := renderConfig(cfg, origins, file)
	if err != nil {
		return fmt.Errorf("baton config: %w", err)
	}
	if _, err := m.Stdout.Write(out); err != nil {
		return fmt.Errorf("baton config: %w", err)
	}
	if err := cfg.Validate(); err != nil {
		return configErr("config", err)
	}
	return nil
}

// renderConfig renders cfg as YAML that decodes back to it (but for the
// redacted values), each key commented with its origin. file is the config
// file read, "" for none.
func renderConfig(cfg Config, origins Origins, file string) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString("# Baton's effective configuration: each key's value and where it came from.\n")
	if file != "" {
		fmt.Fprintf(&b, "# Config file: %s\n", file)
	} else {
		b.WriteString("# No config file (--config FILE or BATON_CONFIG): the defaults and the environment.\n")
	}
	b.WriteString("# Secrets, and the credentials in URLs, show as " + redacted + ".\n")
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(sectionNode(reflect.ValueOf(cfg), "", origins)); err != nil {
		return nil, fmt.Errorf("render config: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("render config: %w", err)
	}
	return b.Bytes(), nil
}

// sectionNode renders the struct v (the section prefix names) as a YAML
// mapping in the order of its fields.
func sectionNode(v reflect.Value, prefix string, origins Origins) *yaml.Node {
	n := &yaml.Node{Kind: yaml.MappingNode}
	t := v.Type()
	for i := range t.NumField() {
		name := yamlName(t.Field(i))
		if name == "" {
			continue
		}
		key := prefix + name
		k := &yaml.Node{Kind: yaml.ScalarNode, Value: name}
		fv := v.Field(i)
		if fv.Kind() == reflect.Struct {
			n.Content = append(n.Content, k, sectionNode(fv, key+".", origins))
			continue
		}
		val := valueNode(key, fv)
		comment := "# " + origins.Of(key).String()
		if val.Kind == yaml.ScalarNode || len(val.Content) == 0 {
			val.LineComment = comment
		} else {
			k.LineComment = comment // above a block list's items
		}
		n.Content = append(n.Content, k, val)
	}
	return n
}

// valueNode renders the value of key as it would be written in a file:
// durations as 30s, secrets redacted, URLs without their credentials.
func valueNode(key string, v reflect.Value) *yaml.Node {
	var x any
	switch {
	case v.Type() == durationType:
		x = shortDuration(time.Duration(v.Int()))
	case v.Type() == reflect.TypeOf(Secret("")):
		x = v.Interface().(Secret).String()
	case v.Kind() == reflect.String && strings.HasSuffix(key, "url"):
		x = redactURL(v.String())
	default:
		x = v.Interface()
	}
	n := &yaml.Node{}
	if err := n.Encode(x); err != nil {
		// Only plain values reach here; a failure is a bug, shown in place.
		return &yaml.Node{Kind: yaml.ScalarNode, Value: "<" + err.Error() + ">"}
	}
	return n
}

// shortDuration writes d as Go does, without zero minutes and seconds
// (1h, 720h, 10m, 1m30s).
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
