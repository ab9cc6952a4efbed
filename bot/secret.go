package main

import (
	"encoding/json"
	"fmt"
	"log/slog"
)

// redacted is what a set Secret shows wherever it is printed.
const redacted = "[redacted]"

// Secret is a configuration value that must never be shown: an API key, a
// bot token, a signing secret. Every way of printing it — fmt verbs, slog
// (text and JSON), encoding/json, encoding.TextMarshaler and YAML — shows
// "[redacted]" when it is set and nothing when it is empty. Reveal returns
// the value itself, for the one place that sends it to its service.
//
// A Secret hides its own whole value and never touches other values, so a
// short key such as Ollama's "ollama" leaves a base URL
// http://ollama:11434/v1 or a model ollama/llama3 as they are. A secret
// said back inside another text (a server's error message) is the
// concern of whoever receives that text: core/llm redacts the API key by
// value there.
type Secret string

// Reveal returns the secret's value. Call it only where the value is handed
// to the service it authenticates against.
func (s Secret) Reveal() string { return string(s) }

// String returns "[redacted]", or "" when s is empty.
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return redacted
}

// Format makes every fmt verb (%v, %+v, %#v, %s, %q, %x, …) print String.
func (s Secret) Format(f fmt.State, verb rune) {
	switch verb {
	case 'q':
		fmt.Fprintf(f, "%q", s.String())
	default:
		fmt.Fprint(f, s.String())
	}
}

// LogValue implements slog.LogValuer.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }

// MarshalJSON implements json.Marshaler.
func (s Secret) MarshalJSON() ([]byte, error) { return json.Marshal(s.String()) }

// MarshalText implements encoding.TextMarshaler.
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// MarshalYAML implements yaml.Marshaler, so that a config written back out
// does not carry its secrets.
func (s Secret) MarshalYAML() (any, error) { return s.String(), nil }
