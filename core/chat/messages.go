package chat

import (
	"strconv"

	"github.com/dustin/go-humanize"

	"github.com/baton-bot/baton/core/catalog"
	"github.com/baton-bot/baton/core/chattext"
	"github.com/baton-bot/baton/core/piece"
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

// MovementText says where a job stands in its piece p, for people: "1
// movement" for a piece of one movement, "movement implement (2 of 3)"
// for a piece of more, and after either ", run 4 of at most 10" once
// count, the movements the job has started, is more than the movement's
// place in the piece (a movement ran again: the piece's budget,
// max_movements, counts every run). With p nil (a piece not known here)
// the movement's name alone.
func MovementText(locale string, p *piece.Piece, movement string, count int) string {
	if movement == "" {
		movement = "-"
	}
	if p == nil {
		return say(locale, "movement_named", "movement", movement)
	}
	place := 0
	for i, m := range p.Movements {
		if m.Name == movement {
			place = i + 1
		}
	}
	var text string
	switch {
	case len(p.Movements) == 1:
		text, place = say(locale, "movements_one"), 1
	case place == 0:
		text = say(locale, "movement_named", "movement", movement)
	default:
		text = say(locale, "movement_of", "movement", movement, "index", strconv.Itoa(place), "n", strconv.Itoa(len(p.Movements)))
	}
	if count > max(place, 1) {
		text += say(locale, "movement_runs", "count", strconv.Itoa(count), "max", strconv.Itoa(p.MaxMovements))
	}
	return text
}

// movementText is MovementText for piece name, looked up in the service's
// pieces.
func (s *Service) movementText(name, movement string, count int) string {
	var p *piece.Piece
	if s.cfg.Pieces != nil {
		p, _ = s.cfg.Pieces.Lookup(name)
	}
	return MovementText(s.cfg.Locale, p, movement, count)
}
