package main

import (
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestVersionText: the version set at link time wins, else the module's
// from the build information; the revision comes from the VCS stamp, and
// a build without one (go test, go run) says so.
func TestVersionText(t *testing.T) {
	platform := runtime.GOOS + "/" + runtime.GOARCH
	stamped := &debug.BuildInfo{
		GoVersion: "go1.26.1",
		Main:      debug.Module{Path: "github.com/baton-bot/baton", Version: "v0.0.0-20260102030405-0123456789ab+dirty"},
		Settings: []debug.BuildSetting{
			{Key: "vcs", Value: "git"},
			{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"},
			{Key: "vcs.time", Value: "2026-01-02T03:04:05Z"},
			{Key: "vcs.modified", Value: "true"},
		},
	}
	tagged := &debug.BuildInfo{
		GoVersion: "go1.26.1",
		Main:      debug.Module{Path: "github.com/baton-bot/baton", Version: "v1.4.0"},
		Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "89abcdef"},
			{Key: "vcs.modified", Value: "false"},
		},
	}
	testBuild := &debug.BuildInfo{GoVersion: "go1.26.1", Main: debug.Module{Path: "github.com/baton-bot/baton", Version: "(devel)"}}
	tests := []struct {
		name   string
		linked string
		bi     *debug.BuildInfo
		want   string
	}{
		{"go build in a checkout", "dev", stamped, "baton v0.0.0-20260102030405-0123456789ab+dirty\n" +
			"module   github.com/baton-bot/baton v0.0.0-20260102030405-0123456789ab+dirty\n" +
			"revision 0123456789abcdef0123456789abcdef01234567 (modified: built with uncommitted changes), committed 2026-01-02T03:04:05Z\n" +
			"go       go1.26.1 " + platform + "\n"},
		{"make build sets the version", "v1.3.0-4-g0123456-dirty", stamped, "baton v1.3.0-4-g0123456-dirty\n" +
			"module   github.com/baton-bot/baton v0.0.0-20260102030405-0123456789ab+dirty\n" +
			"revision 0123456789abcdef0123456789abcdef01234567 (modified: built with uncommitted changes), committed 2026-01-02T03:04:05Z\n" +
			"go       go1.26.1 " + platform + "\n"},
		{"go install at a tag", "", tagged, "baton v1.4.0\n" +
			"module   github.com/baton-bot/baton v1.4.0\n" +
			"revision 89abcdef\n" +
			"go       go1.26.1 " + platform + "\n"},
		{"go test or go run", "dev", testBuild, "baton dev\n" +
			"module   github.com/baton-bot/baton (devel)\n" +
			"revision unknown (built without VCS information: go run, go test or -buildvcs=false)\n" +
			"go       go1.26.1 " + platform + "\n"},
		{"no build information", "dev", nil, "baton dev\n" +
			"revision unknown (built without VCS information: go run, go test or -buildvcs=false)\n" +
			"go       " + runtime.Version() + " " + platform + "\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, versionText(tt.linked, tt.bi)); diff != "" {
				t.Errorf("versionText (-want +got):\n%s", diff)
			}
		})
	}
}

// TestVersionCommand: under go test the command prints the linked version
// and the test binary's build information.
func TestVersionCommand(t *testing.T) {
	code, stdout, stderr := runMain(t, nil, "version")
	bi, _ := debug.ReadBuildInfo()
	if want := versionText("1.2.3-test", bi); code != 0 || stdout != want || stderr != "" {
		t.Errorf("baton version: exit %d, stderr %q\ngot:\n%s\nwant:\n%s", code, stderr, stdout, want)
	}
}
