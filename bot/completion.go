package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"

	"github.com/baton-bot/baton/configs"
	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/piece"
)

// shells are the shells `baton completion` writes scripts for.
var shells = []string{"bash", "zsh", "fish"}

// compFlag is one flag as a completion script offers it.
type compFlag struct {
	name   string
	usage  string
	bool   bool
	kind   string   // "file", "dir", or "" (see valueKind)
	values []string // the values to offer, when known
}

// compCommand is one command as a completion script offers it.
type compCommand struct {
	name, summary string
	words         []string // its first argument: subcommands, shells, commands
	files         bool     // its arguments are files (pieces validate)
	flags         []compFlag
}

func (m *Main) completion(ctx context.Context, args []string) error {
	fs := m.newFlagSet("completion")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 || !slices.Contains(shells, fs.Arg(0)) {
		fs.Usage()
		return usageErr("baton completion: name one shell: %s", strings.Join(shells, ", "))
	}
	cmds := m.completionModel(ctx)
	switch fs.Arg(0) {
	case "bash":
		writeBash(m.Stdout, cmds)
	case "zsh":
		writeZsh(m.Stdout, cmds)
	case "fish":
		writeFish(m.Stdout, cmds)
	}
	return nil
}

// completionModel collects every command's flags by running it with
// --help while m.describe takes the flag sets (nothing is printed and
// nothing is started: setup refuses while describe is set). Piece names
// are the built-in pieces': reading pieces_dir would need the
// configuration, which the script runs without.
func (m *Main) completionModel(ctx context.Context) []compCommand {
	pieces := builtinPieceNames()
	var states []string
	for _, s := range core.JobStates {
		states = append(states, string(s))
	}
	var names []string
	for _, c := range commands {
		names = append(names, c.name)
	}
	sub := *m
	sub.Stdin, sub.Stdout, sub.Stderr = strings.NewReader(""), io.Discard, io.Discard
	var out []compCommand
	for _, c := range commands {
		cc := compCommand{name: c.name, summary: c.summary}
		seen := map[string]bool{}
		sub.describe = func(_ string, sets []namedFlags) {
			for _, s := range sets {
				if s.sub != "" && !slices.Contains(cc.words, s.sub) {
					cc.words = append(cc.words, s.sub)
				}
				s.fs.VisitAll(func(f *flag.Flag) {
					if seen[f.Name] || f.Name == "h" {
						return
					}
					seen[f.Name] = true
					cf := compFlag{name: f.Name, bool: isBool(f)}
					value, usage := flag.UnquoteUsage(f)
					cf.usage = usage
					cf.kind, cf.values = valueKind(value, pieces, states)
					cc.flags = append(cc.flags, cf)
				})
			}
		}
		_ = c.run(&sub, ctx, []string{"--help"})
		sort.Slice(cc.flags, func(i, j int) bool { return cc.flags[i].name < cc.flags[j].name })
		switch c.name {
		case "pieces":
			cc.words, cc.files = []string{"validate", "list"}, true
		case "completion":
			cc.words = shells
		case "help":
			cc.words = names
		}
		out = append(out, cc)
	}
	return out
}

// valueKind says what a flag's value is from the name its usage gives it
// (the `file` of "config `file`").
func valueKind(value string, pieces, states []string) (kind string, values []string) {
	switch value {
	case "file":
		return "file", nil
	case "directory":
		return "dir", nil
	case "piece":
		return "", pieces
	case "state":
		return "", states
	}
	return "", nil
}

func isBool(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// builtinPieceNames lists the pieces built into the binary.
func builtinPieceNames() []string {
	lib, err := piece.Load(configs.FS, "", piece.Rules{})
	if err != nil {
		return nil
	}
	return lib.Names()
}

func writeBash(w io.Writer, cmds []compCommand) {
	var names []string
	for _, c := range cmds {
		names = append(names, c.name)
	}
	fmt.Fprintf(w, `# bash completion for baton. Load it with
#   source <(baton completion bash)
# or install it: baton completion bash > /etc/bash_completion.d/baton
_baton() {
    local cur prev cmd subs flags
    cur="${COMP_WORDS[COMP_CWORD]}"
    prev="${COMP_WORDS[COMP_CWORD-1]}"
    COMPREPLY=()
    if [[ $COMP_CWORD -eq 1 ]]; then
        COMPREPLY=($(compgen -W %s -- "$cur"))
        return
    fi
    cmd="${COMP_WORDS[1]}"
    case "$cmd $prev" in
`, shellQuote(strings.Join(names, " ")))
	for _, c := range cmds {
		for _, f := range c.flags {
			if f.bool {
				continue
			}
			pat := fmt.Sprintf("%s\" --%s\"|%s\" -%s\"", c.name, f.name, c.name, f.name)
			switch {
			case f.kind == "file":
				fmt.Fprintf(w, "        %s) COMPREPLY=($(compgen -f -- \"$cur\")); return ;;\n", pat)
			case f.kind == "dir":
				fmt.Fprintf(w, "        %s) COMPREPLY=($(compgen -d -- \"$cur\")); return ;;\n", pat)
			case len(f.values) > 0:
				fmt.Fprintf(w, "        %s) COMPREPLY=($(compgen -W %s -- \"$cur\")); return ;;\n", pat, shellQuote(strings.Join(f.values, " ")))
			default:
				fmt.Fprintf(w, "        %s) return ;;\n", pat)
			}
		}
	}
	fmt.Fprint(w, "    esac\n    case \"$cmd\" in\n")
	for _, c := range cmds {
		var fl []string
		for _, f := range c.flags {
			fl = append(fl, "--"+f.name)
		}
		fmt.Fprintf(w, "        %s) subs=%s; flags=%s ;;\n", c.name, shellQuote(strings.Join(c.words, " ")), shellQuote(strings.Join(fl, " ")))
	}
	fmt.Fprint(w, `        *) return ;;
    esac
    if [[ "$cur" == -* ]]; then
        COMPREPLY=($(compgen -W "$flags" -- "$cur"))
    elif [[ $COMP_CWORD -eq 2 && -n "$subs" ]]; then
        COMPREPLY=($(compgen -W "$subs" -- "$cur"))
    fi
}
complete -o default -F _baton baton
`)
}

func writeZsh(w io.Writer, cmds []compCommand) {
	fmt.Fprint(w, `#compdef baton
# zsh completion for baton. Load it with
#   source <(baton completion zsh)
# or install it as _baton in a directory of $fpath.
_baton() {
    local -a commands
    commands=(
`)
	for _, c := range cmds {
		fmt.Fprintf(w, "        %s\n", shellQuote(c.name+":"+c.summary))
	}
	fmt.Fprint(w, `    )
    if (( CURRENT == 2 )); then
        _describe -t commands 'baton command' commands
        return
    fi
    local cmd=${words[2]}
    shift words
    (( CURRENT-- ))
    case $cmd in
`)
	for _, c := range cmds {
		fmt.Fprintf(w, "        %s)\n            _arguments -s", c.name)
		for _, f := range c.flags {
			spec := "--" + f.name + "[" + zshDesc(f.usage) + "]"
			switch {
			case f.bool:
			case f.kind == "file":
				spec += ":file:_files"
			case f.kind == "dir":
				spec += ":directory:_files -/"
			case len(f.values) > 0:
				spec += ":value:(" + strings.Join(f.values, " ") + ")"
			default:
				spec += ":value: "
			}
			fmt.Fprintf(w, " \\\n                %s", shellQuote(spec))
		}
		switch {
		case len(c.words) > 0 && c.files:
			fmt.Fprintf(w, " \\\n                %s \\\n                '*:file:_files'", shellQuote("1:subcommand:("+strings.Join(c.words, " ")+")"))
		case len(c.words) > 0:
			fmt.Fprintf(w, " \\\n                %s", shellQuote("1:argument:("+strings.Join(c.words, " ")+")"))
		default:
			fmt.Fprint(w, " \\\n                '*:argument: '")
		}
		fmt.Fprint(w, "\n            ;;\n")
	}
	fmt.Fprint(w, `    esac
}
if [ "$funcstack[1]" = "_baton" ]; then
    _baton "$@"
else
    compdef _baton baton
fi
`)
}

func writeFish(w io.Writer, cmds []compCommand) {
	var names []string
	for _, c := range cmds {
		names = append(names, c.name)
	}
	fmt.Fprint(w, `# fish completion for baton. Load it with
#   baton completion fish | source
# or install it: baton completion fish > ~/.config/fish/completions/baton.fish
complete -c baton -f
`)
	for _, c := range cmds {
		fmt.Fprintf(w, "complete -c baton -n __fish_use_subcommand -a %s -d %s\n", c.name, shellQuote(c.summary))
	}
	for _, c := range cmds {
		in := shellQuote("__fish_seen_subcommand_from " + c.name)
		if len(c.words) > 0 {
			cond := shellQuote(fmt.Sprintf("__fish_seen_subcommand_from %s; and not __fish_seen_subcommand_from %s", c.name, strings.Join(c.words, " ")))
			if c.name == "help" {
				cond = shellQuote(fmt.Sprintf("__fish_seen_subcommand_from help; and test (count (commandline -opc)) -eq 2"))
			}
			fmt.Fprintf(w, "complete -c baton -n %s -a %s\n", cond, shellQuote(strings.Join(c.words, " ")))
		}
		if c.files {
			fmt.Fprintf(w, "complete -c baton -n %s -F\n", shellQuote("__fish_seen_subcommand_from validate"))
		}
		for _, f := range c.flags {
			line := fmt.Sprintf("complete -c baton -n %s -l %s", in, f.name)
			switch {
			case f.bool:
			case f.kind == "file":
				line += " -r -F"
			case f.kind == "dir":
				line += " -x -a '(__fish_complete_directories)'"
			case len(f.values) > 0:
				line += " -x -a " + shellQuote(strings.Join(f.values, " "))
			default:
				line += " -x"
			}
			fmt.Fprintf(w, "%s -d %s\n", line, shellQuote(f.usage))
		}
	}
}

// shellQuote quotes s for bash, zsh and fish alike: in single quotes, each
// single quote of s closing the quotes, escaped, and opening them again.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// zshDesc makes a flag's usage fit between _arguments' brackets: one
// clause, without the brackets and colons it would take for syntax.
func zshDesc(s string) string {
	s, _, _ = strings.Cut(s, " (")
	return strings.NewReplacer("[", "(", "]", ")", ":", " -", "\\", "/").Replace(s)
}
