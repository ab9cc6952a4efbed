package chat

import "github.com/baton-bot/baton/core/catalog"

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
