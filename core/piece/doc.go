// Package piece loads and validates pieces: YAML state machines whose states
// are movements. A movement is one agent loop with its own persona,
// instruction template, tool allow-list and the next steps it may choose
// when it calls transition. The piece runner executes a *Piece; this package
// only reads, checks and renders it.
//
// # File format
//
//	name: plan-implement-verify      # unique; letters, digits, '.', '_', '-'
//	description: Plan, do, check     # text (see below)
//	initial_movement: plan           # optional: the first movement by default
//	max_movements: 20                # movement runs per job (default 10)
//	personas:                        # optional: name -> text or .md path
//	  planner: ../personas/planner.md
//	movements:
//	  - name: plan
//	    persona: planner             # a key of personas, a .md path or inline text
//	    instruction: "Plan: {task}"  # text template
//	    tools: [Read, Glob, Grep]    # transition is always offered; never list it
//	    next: [implement, ASK]       # movement names and sentinels
//	    default_next: implement      # one of next; absent means ABORT
//	    max_iterations: 30           # LLM calls before a forced transition (default 30)
//	    model: ""                    # per-movement model override
//	    network: false               # Bash may reach the network
//	    verify: false                # summary becomes feedback for the movement it sends work back to
//	    git_context: false           # git status/diff excerpt for the next movement
//
// # Text and locales
//
// description, instruction, persona and the values of personas are Text: a
// plain string, or a map by locale such as {en: "…", ja: "…"}. The locales
// Baton knows are en and ja; any other key is an error. A plain string is
// stored under en; Text.For falls back to en, then to any locale present.
//
// # Personas
//
// A persona value is resolved in this order:
//
//  1. a key of the piece's personas map: that entry's text;
//  2. a single token ending in ".md": a file path relative to the piece file,
//     which must exist;
//  3. a single token made only of ASCII letters, digits, '.', '_' or '-' (it
//     looks like a name): an error, because it is most likely a misspelt key;
//  4. anything else (several words, or Japanese text): inline text.
//
// Japanese personas follow one scheme: a persona file "dir/name.md" given as a
// plain string supplies the en text, and a sibling "dir/name.ja.md", when it
// exists, supplies the ja text. To pick files explicitly, write a locale map
// of paths instead ({en: a.md, ja: b.md}); siblings are then not looked for.
//
// # Validation
//
// Parse rejects unknown fields at every level, unknown tools, next,
// default_next and initial_movement naming no movement, sentinels outside
// next, a default_next missing from next, movements unreachable from the
// initial movement, duplicate names, unresolvable personas and budgets below
// one. Every problem is an *Error printed as "file:line: message"; Parse
// reports all of them at once, joined with errors.Join.
package piece
