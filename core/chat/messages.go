package chat

import (
	"github.com/dustin/go-humanize"

	"github.com/baton-bot/baton/core/catalog"
	"github.com/baton-bot/baton/core/chattext"
)

// Say returns the bot's text key in locale, with {name} placeholders
// filled from pairs, for the answers an adapter gives by itself (a slash
// command that is not Baton's). The texts are the catalogue's chat section
// (core/catalog/*/chat.yaml); an unknown locale or key falls back to
// English, and a key unknown in English too is returned as itself.
func Say(locale, key string, pairs ...string) string { return say(locale, key, pairs...) }

// say returns text key in locale with {name} placeholders filled from
// pairs (name, value, name, value, …).
func say(locale, key string, pairs ...string) string {
	return catalog.Or(locale).Fill("chat."+key, pairs...)
}

// UploadTooLarge is the note that tells a thread the file at rel (a path
// relative to the task's workspace, e.g. output/big.bin) of size bytes was
// not uploaded because it is over the limit of files.max_bytes. Sizes are
// shown in SI units ("39 MB"), as files.max_bytes is written; the path is
// made inert and one line (chattext.NeutralizeName).
func UploadTooLarge(locale, rel string, size, limit int64) string {
	return say(locale, "upload_too_large", "file", chattext.NeutralizeName(rel, chattext.Plain),
		"size", humanize.Bytes(uint64(max(size, 0))), "limit", humanize.Bytes(uint64(max(limit, 0))))
}
