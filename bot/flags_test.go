package main

import (
	"context"
	"flag"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/baton-bot/baton/core/llmtest"
	"github.com/google/go-cmp/cmp"
)

// TestFlagOrder: `baton run` reads its flags before and after the
// instruction; -- ends the flags; an instruction that flags split, or a
// word that looks like a flag and is none, is refused with exit 2 before
// the model is asked anything.
func TestFlagOrder(t *testing.T) {
	const researchMark = "Turn the request above into research questions"
	asked := llmtest.Call("transition", `{"next_step":"ASK","summary":"need scope","question":"Which sources?"}`)
	done := llmtest.Call("transition", `{"next_step":"COMPLETE","summary":"Done."}`)
	tests := []struct {
		name     string
		args     []string
		script   []llmtest.Step
		wantCode int
		research bool // the research piece ran (else chat)
		// wantRequest is the request as the model reads it (the line
		// under "## Request"), nothing more.
		wantRequest string
		stderr      string // in stderr, for a refusal
	}{
		{name: "flag after the instruction", args: []string{"say hi", "--piece", "research"}, script: []llmtest.Step{asked}, wantCode: 3, research: true, wantRequest: "say hi"},
		{name: "flag before the instruction", args: []string{"--piece", "research", "say hi"}, script: []llmtest.Step{asked}, wantCode: 3, research: true, wantRequest: "say hi"},
		{name: "flag=value after unquoted words", args: []string{"say", "hi", "--piece=research"}, script: []llmtest.Step{asked}, wantCode: 3, research: true, wantRequest: "say hi"},
		{name: "-- ends the flags", args: []string{"--", "--piece is text"}, script: []llmtest.Step{done}, wantCode: 0, wantRequest: "--piece is text"},
		{name: "flags, then --", args: []string{"--piece", "research", "--", "--verbose please"}, script: []llmtest.Step{asked}, wantCode: 3, research: true, wantRequest: "--verbose please"},
		{name: "flags split the instruction", args: []string{"say", "--piece", "research", "hi"}, wantCode: 2, stderr: `flags split the instruction ("say" "hi")`},
		{name: "a word that looks like a flag", args: []string{"say hi", "--pice", "research"}, wantCode: 2, stderr: "put -- before text"},
		{name: "text that starts with dashes", args: []string{"--piece is text"}, wantCode: 2, stderr: `baton run -- "--piece is text"`},
		{name: "-- after the instruction and flags", args: []string{"say", "--piece", "chat", "--", "hi"}, wantCode: 2, stderr: "flags split the instruction"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := newNewcomer(t)
			n.srv.Script(tt.script...)
			code, stdout, stderr := n.run(tt.args...)
			if code != tt.wantCode {
				t.Fatalf("baton run %q: exit %d, want %d\nstdout: %s\nstderr: %s", tt.args, code, tt.wantCode, stdout, stderr)
			}
			reqs := n.srv.Requests()
			if tt.wantCode == 2 {
				if !strings.Contains(stderr, tt.stderr) {
					t.Errorf("stderr lacks %q:\n%s", tt.stderr, stderr)
				}
				if len(reqs) > 0 {
					t.Errorf("a refused command line asked the model %d times", len(reqs))
				}
				return
			}
			if len(reqs) == 0 {
				t.Fatal("the model was not asked")
			}
			var all strings.Builder
			for _, m := range reqs[0].Messages {
				all.WriteString(m.Text() + "\n")
			}
			text := all.String()
			_, after, ok := strings.Cut(text, "## Request\n")
			request, _, _ := strings.Cut(after, "\n")
			if !ok || request != tt.wantRequest {
				t.Errorf("the model was sent the request %q, want %q:\n%s", request, tt.wantRequest, text)
			}
			if got := strings.Contains(text, researchMark); got != tt.research {
				t.Errorf("research piece ran: %v, want %v", got, tt.research)
			}
		})
	}
}

// TestFlagRuns: parseArgs counts the stretches of arguments flags
// separate, and leaves fs.Args() holding the arguments alone.
func TestFlagRuns(t *testing.T) {
	tests := []struct {
		args     []string
		wantArgs []string
		wantRuns int
	}{
		{nil, nil, 0},
		{[]string{"--piece", "x"}, nil, 0},
		{[]string{"a", "b"}, []string{"a", "b"}, 1},
		{[]string{"a", "b", "--piece", "x"}, []string{"a", "b"}, 1},
		{[]string{"--piece", "x", "a"}, []string{"a"}, 1},
		{[]string{"a", "--piece", "x", "b"}, []string{"a", "b"}, 2},
		{[]string{"a", "--", "--b"}, []string{"a", "--b"}, 1},
		{[]string{"--", "--piece", "x"}, []string{"--piece", "x"}, 1},
		{[]string{"a", "--json", "--", "b"}, []string{"a", "b"}, 2},
		{[]string{"--"}, nil, 0},
	}
	for _, tt := range tests {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.String("piece", "", "")
		fs.Bool("json", false, "")
		p, err := parseArgs(fs, tt.args)
		if err != nil {
			t.Errorf("parseArgs(%q): %v", tt.args, err)
			continue
		}
		if diff := cmp.Diff(tt.wantArgs, p.args); diff != "" || p.runs != tt.wantRuns {
			t.Errorf("parseArgs(%q): runs %d, want %d; args (-want +got):\n%s", tt.args, p.runs, tt.wantRuns, diff)
		}
		if diff := cmp.Diff(tt.wantArgs, fs.Args(), cmpEmpty); diff != "" {
			t.Errorf("parseArgs(%q): fs.Args() (-want +got):\n%s", tt.args, diff)
		}
	}
}

var cmpEmpty = cmp.Comparer(func(a, b []string) bool { return slices.Equal(a, b) })

// TestHelpEveryCommand: `baton help X` and `baton X --help` print the same
// help for every command: its synopsis, each of its flags and an example,
// on stdout with exit 0, and start nothing (the data directory stays
// empty). An unknown command is exit 2.
func TestHelpEveryCommand(t *testing.T) {
	data := t.TempDir()
	env := map[string]string{"BATON_DATA_DIR": data}
	flags := map[string][]compFlag{}
	for _, c := range NewMain().completionModel(context.Background()) {
		flags[c.name] = c.flags
	}
	for _, c := range commands {
		t.Run(c.name, func(t *testing.T) {
			if len(examples[c.name]) == 0 {
				t.Errorf("command %s has no example: add one to examples in bot/flags.go", c.name)
			}
			code, viaHelp, stderr := runMain(t, env, "help", c.name)
			if code != 0 || stderr != "" {
				t.Fatalf("baton help %s: exit %d, stderr %q", c.name, code, stderr)
			}
			code, viaFlag, stderr := runMain(t, env, c.name, "--help")
			if code != 0 || stderr != "" {
				t.Fatalf("baton %s --help: exit %d, stderr %q", c.name, code, stderr)
			}
			if viaHelp != viaFlag {
				t.Errorf("baton help %s and baton %s --help differ:\n%s\n---\n%s", c.name, c.name, viaHelp, viaFlag)
			}
			want := []string{"Usage: baton " + c.name, c.summary, "\nExamples:\n"}
			for _, e := range examples[c.name] {
				if !strings.Contains(e, "baton "+c.name) {
					t.Errorf("example %q does not run baton %s", e, c.name)
				}
				want = append(want, "  "+e+"\n")
			}
			if len(flags[c.name]) == 0 {
				t.Errorf("no flags were collected for %s (its --help does not reach its flag set?)", c.name)
			}
			for _, f := range flags[c.name] {
				name := "--" + f.name
				if f.name == "help" {
					name = "-h, --help"
				}
				want = append(want, "  "+name)
			}
			for _, w := range want {
				if !strings.Contains(viaHelp, w) {
					t.Errorf("baton help %s lacks %q:\n%s", c.name, w, viaHelp)
				}
			}
		})
	}
	if entries, err := os.ReadDir(data); err != nil || len(entries) > 0 {
		t.Errorf("asking for help created %v in the data directory (%v)", entries, err)
	}
	for _, args := range [][]string{{"help", "nosuch"}, {"help", "run", "chat"}} {
		code, _, stderr := runMain(t, nil, args...)
		if code != 2 || stderr == "" {
			t.Errorf("baton %s: exit %d, stderr %q; want 2 and a message", strings.Join(args, " "), code, stderr)
		}
	}
	if code, stdout, _ := runMain(t, nil, "tasks", "logs", "--help"); code != 0 || !strings.Contains(stdout, "Flags of tasks logs:\n") || !strings.Contains(stdout, "--job J") {
		t.Errorf("baton tasks logs --help: exit %d\n%s", code, stdout)
	}
	// A flag after the arguments asks for help too; after -- it is text.
	if code, stdout, _ := runMain(t, nil, "run", "say hi", "-h"); code != 0 || !strings.Contains(stdout, "Usage: baton run") {
		t.Errorf("baton run \"say hi\" -h: exit %d\n%s", code, stdout)
	}
}
