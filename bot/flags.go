package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
)

// examples are the command lines each command's help shows: one or two a
// command, what a newcomer would type first. TestHelpEveryCommand asks for
// at least one for every command in commands.
var examples = map[string][]string{
	"serve":      {"baton serve --config baton.yaml"},
	"gateway":    {"REDIS_URL=redis://localhost:6379 baton gateway --config baton.yaml"},
	"worker":     {"REDIS_URL=redis://localhost:6379 baton worker --config baton.yaml"},
	"chat":       {"baton chat", "baton chat --piece research --data-dir ./data"},
	"run":        {`baton run "Write a haiku about job queues to output/haiku.txt"`, `baton run "Compare SQLite and Postgres for a job queue" --piece research`, `baton run --task 3 --approve`},
	"tasks":      {"baton tasks list --state waiting_human", "baton tasks show 3", "baton tasks logs 3 --job 7"},
	"pieces":     {"baton pieces list", "baton pieces validate configs/pieces/review.yaml"},
	"migrate":    {"baton migrate --config baton.yaml"},
	"mcp":        {"baton mcp list --config baton.yaml"},
	"store":      {`baton store copy --from sqlite:./data/baton.db --to "$DATABASE_URL"`},
	"init":       {"baton init", "baton init --non-interactive --provider ollama --model llama3.1 --slack socket"},
	"doctor":     {"baton doctor --config baton.yaml", "baton doctor --json | jq '.checks[] | select(.status == \"fail\")'"},
	"config":     {"baton config --config baton.yaml", "BATON_LLM_MODEL=gpt-4.1 baton config"},
	"usage":      {"baton usage --period week", "baton usage --json | jq .by_channel"},
	"completion": {"source <(baton completion bash)", "baton completion fish > ~/.config/fish/completions/baton.fish"},
	"version":    {"baton version"},
	"help":       {"baton help run"},
}

// The sandbox starts sandbox-bridge, not people: its example shows what
// the sandbox runs.
func init() {
	examples["sandbox-bridge"] = []string{"baton sandbox-bridge --socket /run/baton/egress.sock -- curl https://pypi.org/simple/"}
}

// helpFlag is the -h and --help of every flag set newFlagSet makes: asking
// for it describes the command instead of running it (see parseArgs).
type helpFlag struct {
	asked bool
	show  func()
}

func (h *helpFlag) String() string { return "false" }
func (h *helpFlag) Set(s string) error {
	if s != "false" {
		h.asked = true
	}
	return nil
}
func (h *helpFlag) IsBoolFlag() bool { return true }

// namedFlags is the flag set of one command, or of one of its
// subcommands (sub "" for a command without any).
type namedFlags struct {
	sub string
	fs  *flag.FlagSet
}

// newFlagSet returns an empty flag set for cmd with -h/--help. Errors go to
// Stderr with the synopsis; help goes to Stdout (or to m.describe).
func (m *Main) newFlagSet(cmd string) *flag.FlagSet {
	fs := flag.NewFlagSet("baton "+cmd, flag.ContinueOnError)
	fs.SetOutput(m.Stderr)
	h := &helpFlag{}
	h.show = func() { m.showHelp(cmd, namedFlags{fs: fs}) }
	fs.Var(h, "help", "show this help")
	fs.Var(h, "h", "show this help")
	fs.Usage = func() {
		c, _ := lookup(cmd)
		fmt.Fprintf(fs.Output(), "Usage: %s\nRun 'baton help %s' for its flags and examples.\n", strings.TrimSpace("baton "+cmd+" "+c.args), cmd)
	}
	return fs
}

// onHelp makes show what asking fs for help does (a command with
// subcommands shows all of them).
func onHelp(fs *flag.FlagSet, show func()) {
	if f := fs.Lookup("help"); f != nil {
		if h, ok := f.Value.(*helpFlag); ok {
			h.show = show
		}
	}
}

// showHelp describes cmd and its flag sets: to m.describe when set (help
// and completion collecting flags), else printed on Stdout.
func (m *Main) showHelp(cmd string, sets ...namedFlags) {
	if m.describe != nil {
		m.describe(cmd, sets)
		return
	}
	writeHelp(m.Stdout, cmd, sets)
}

// writeHelp prints a command's help: synopsis, summary, flags, examples.
func writeHelp(w io.Writer, cmd string, sets []namedFlags) {
	c, _ := lookup(cmd)
	fmt.Fprintf(w, "Usage: %s\n\n%s\n", strings.TrimSpace("baton "+cmd+" "+c.args), c.summary)
	for _, s := range sets {
		if s.sub == "" {
			fmt.Fprint(w, "\nFlags:\n")
		} else {
			fmt.Fprintf(w, "\nFlags of %s %s:\n", cmd, s.sub)
		}
		writeFlags(w, s.fs)
	}
	if len(sets) == 0 {
		fmt.Fprint(w, "\nFlags:\n  -h, --help  show this help\n")
	}
	if ex := examples[cmd]; len(ex) > 0 {
		fmt.Fprint(w, "\nExamples:\n")
		for _, e := range ex {
			fmt.Fprintf(w, "  %s\n", e)
		}
	}
	if takesText(cmd) {
		fmt.Fprintf(w, "\nFlags may come before or after the arguments; -- ends the flags (baton %s -- \"--text that starts with dashes\").\n", cmd)
	}
}

// takesText reports whether cmd takes free text as arguments.
func takesText(cmd string) bool { return cmd == "run" }

// writeFlags lists fs's flags with their values and meanings, aligned,
// as --name (the flag package accepts one dash or two).
func writeFlags(w io.Writer, fs *flag.FlagSet) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fs.VisitAll(func(f *flag.Flag) {
		if f.Name == "h" || f.Name == "help" {
			return
		}
		value, usage := flag.UnquoteUsage(f)
		name := "--" + f.Name
		if value != "" {
			name += " " + value
		}
		if d := f.DefValue; d != "" && d != "0" && d != "false" {
			usage += fmt.Sprintf(" (default %s)", d)
		}
		fmt.Fprintf(tw, "  %s\t%s\n", name, usage)
	})
	if fs.Lookup("help") != nil {
		fmt.Fprintf(tw, "  -h, --help\tshow this help\n")
	}
	tw.Flush()
}

// parsed is what parseArgs found besides the flags.
type parsed struct {
	args []string // the arguments, in order
	// runs counts the stretches of arguments that flags separate:
	// `a b --piece x` is one, `a --piece x b` two. "--" does not separate.
	runs int
}

// parseArgs parses the flags in args wherever they stand, before, between
// or after the arguments, until "--", after which everything is an
// argument. Afterwards fs.Args() holds the arguments. A bad flag is a usage
// error already printed (for a command that takes text, with a hint about
// --); -h or --help shows the command's help and returns an error with
// exit code 0.
func parseArgs(fs *flag.FlagSet, args []string) (parsed, error) {
	var p parsed
	rest := args
	flagsSince := true // flags were parsed since the last argument
	for {
		err := fs.Parse(rest)
		consumed := len(rest) - fs.NArg()
		if err != nil {
			if takesText(strings.TrimPrefix(fs.Name(), "baton ")) && strings.Contains(err.Error(), "not defined") {
				fmt.Fprintf(fs.Output(), "Words that start with - are read as flags: put -- before text that does (%s -- \"--piece is text\").\n", fs.Name())
			}
			return p, parseErr(err)
		}
		ended := consumed > 0 && rest[consumed-1] == "--"
		if ended {
			consumed-- // the "--" itself
		}
		if consumed > 0 {
			flagsSince = true
		}
		rest = fs.Args()
		if len(rest) == 0 {
			break
		}
		if ended {
			if flagsSince {
				p.runs++
			}
			p.args = append(p.args, rest...)
			break
		}
		if flagsSince {
			p.runs++
			flagsSince = false
		}
		p.args = append(p.args, rest[0])
		rest = rest[1:]
		if len(rest) == 0 {
			break
		}
	}
	// fs.Args() must say what the arguments were, flags taken out.
	if err := fs.Parse(append([]string{"--"}, p.args...)); err != nil {
		return p, parseErr(err)
	}
	if f := fs.Lookup("help"); f != nil {
		if h, ok := f.Value.(*helpFlag); ok && h.asked {
			h.show()
			return p, &exitError{code: exitOK, err: flag.ErrHelp, reported: true}
		}
	}
	return p, nil
}

// parseErr maps an error of fs.Parse: -h on a flag set without helpFlag
// is a request for help (exit 0), anything else a usage error the flag
// package has printed.
func parseErr(err error) error {
	if errors.Is(err, flag.ErrHelp) {
		return &exitError{code: exitOK, err: err, reported: true}
	}
	return &exitError{code: exitUsage, err: err, reported: true}
}

// wantsHelp reports whether args, before any "--", ask for help: for the
// commands that look at their first argument before any flag set exists.
func wantsHelp(args []string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		if slices.Contains([]string{"-h", "-help", "--help"}, a) {
			return true
		}
	}
	return false
}
