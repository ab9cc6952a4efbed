package llm_test

import (
	"bytes"
	"encoding/json"
	"io"
	"os/exec"
	"strings"
	"testing"
)

// TestOnlyImporter keeps go-openai behind this package: no other package of
// the module, nor its tests, may import it.
func TestOnlyImporter(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go is not on PATH")
	}
	root, err := exec.Command(goBin, "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		t.Fatalf("go list -m: %v", err)
	}
	cmd := exec.Command(goBin, "list", "-deps", "-json", "./...")
	cmd.Dir = strings.TrimSpace(string(root))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps -json ./...: %v\n%s", err, stderr.String())
	}
	const (
		module  = "github.com/baton-bot/baton"
		allowed = module + "/core/llm"
		banned  = "github.com/sashabaranov/go-openai"
	)
	dec := json.NewDecoder(bytes.NewReader(out))
	seen := 0
	for {
		var p struct {
			ImportPath   string
			Module       *struct{ Path string }
			Imports      []string
			TestImports  []string
			XTestImports []string
		}
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("decode go list output: %v", err)
		}
		if p.Module == nil || p.Module.Path != module {
			continue
		}
		seen++
		if p.ImportPath == allowed {
			continue
		}
		for _, imp := range append(append(p.Imports, p.TestImports...), p.XTestImports...) {
			if imp == banned || strings.HasPrefix(imp, banned+"/") {
				t.Errorf("%s imports %s; only %s may", p.ImportPath, imp, allowed)
			}
		}
	}
	if seen == 0 {
		t.Fatal("go list reported no package of the module")
	}
}
