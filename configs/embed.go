// Package configs embeds Baton's built-in pieces and personas so that the
// binary runs from any directory. FS holds pieces/*.yaml and personas/*.md;
// a piece refers to its personas by paths relative to its own file
// (../personas/planner.md). A persona file name.md is the English text and
// name.ja.md beside it the Japanese one (see package core/piece).
// SlackManifest is the Slack app manifest, which `baton init` prints and
// `baton doctor` checks a bot token's scopes against.
package configs

import "embed"

// FS is the built-in file system: pieces/ and personas/. It is read-only and
// safe for concurrent use.
//
//go:embed pieces personas
var FS embed.FS

// SlackManifest is slack-app-manifest.yaml as written, comments included.
//
//go:embed slack-app-manifest.yaml
var SlackManifest []byte
