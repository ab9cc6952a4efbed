package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
	"text/tabwriter"
)

// versionText is what `baton version` prints: the version, then the
// module, the VCS revision and the Go toolchain, aligned.
//
// The version is the one set at link time (-X main.version, as make build
// and the Dockerfile do) when there is one, else the module's from bi: its
// tag under `go install …@v1.2.3`, a pseudo-version under `go build` in a
// checkout. bi is nil when the binary carries no build information; `go
// test` and `go run` builds carry no revision (nor does -buildvcs=false),
// and the revision line says so.
func versionText(linked string, bi *debug.BuildInfo) string {
	var b strings.Builder
	modPath, modVersion := "", ""
	var rev, at string
	modified := false
	goVersion := runtime.Version()
	if bi != nil {
		modPath, modVersion = bi.Main.Path, bi.Main.Version
		if bi.GoVersion != "" {
			goVersion = bi.GoVersion
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.time":
				at = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
	}
	v := linked
	if v == "" || v == "dev" {
		v = modVersion
	}
	if v == "" || v == "(devel)" {
		v = "dev"
	}
	fmt.Fprintf(&b, "baton %s\n", v)
	tw := tabwriter.NewWriter(&b, 0, 4, 1, ' ', 0)
	if modPath != "" {
		mv := modVersion
		if mv == "" {
			mv = "(devel)"
		}
		fmt.Fprintf(tw, "module\t%s %s\n", modPath, mv)
	}
	switch {
	case rev != "":
		line := rev
		if modified {
			line += " (modified: built with uncommitted changes)"
		}
		if at != "" {
			line += ", committed " + at
		}
		fmt.Fprintf(tw, "revision\t%s\n", line)
	default:
		fmt.Fprintf(tw, "revision\tunknown (built without VCS information: go run, go test or -buildvcs=false)\n")
	}
	fmt.Fprintf(tw, "go\t%s %s/%s\n", goVersion, runtime.GOOS, runtime.GOARCH)
	tw.Flush()
	return b.String()
}
