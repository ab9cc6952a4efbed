package main

import (
	"os"
	"strings"
	"testing"
)

// FuzzConfig: any file decodes to a config or to an error naming the file;
// decoding and validating never panic, and a secret written in the file
// never appears in an error.
func FuzzConfig(f *testing.F) {
	if example, err := os.ReadFile(examplePath); err == nil {
		f.Add(string(example))
	}
	f.Add("llm:\n  api_key: sk-fuzz-secret\n  model: x\n")
	f.Add("llm:\n  modle: x\n")
	f.Add("slack: [1, 2\n")
	f.Add("queue:\n  lease: -1s\nworkers:\n  concurrency: 0\n")
	f.Add("access:\n  admins: {a: b}\n")
	f.Add("approvals:\n  approvers: [U1]\n  rules:\n    - tool: '['\n      match: '('\n      channels: [C1]\n    - {tool: Bash, action: ask, extra: 1}\n")
	f.Add("&a [*a, *a]\n")
	f.Add("\t\x00\xff")
	f.Fuzz(func(t *testing.T, data string) {
		cfg := DefaultConfig()
		err := decodeConfig([]byte(data), "fuzz.yaml", &cfg, nil)
		if err == nil {
			err = cfg.Validate()
		} else if !strings.Contains(err.Error(), "fuzz.yaml") {
			t.Errorf("decode error does not name the file: %v", err)
		}
		if err != nil && strings.Contains(err.Error(), "sk-fuzz-secret") {
			t.Errorf("an error shows the API key: %v", err)
		}
	})
}
