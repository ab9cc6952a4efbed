package chat

import (
	"testing"

	"github.com/baton-bot/baton/core/piece"
)

func TestMentionID(t *testing.T) {
	for id, want := range map[string]string{"slack:U1": "<@U1>", "discord:42": "<@42>", "console:alice": "alice", "api:ci": "ci", "bare": "bare"} {
		if got := mentionID(id); got != want {
			t.Errorf("mentionID(%q) = %q, want %q", id, got, want)
		}
	}
}

func TestSayInJapanese(t *testing.T) {
	if got, want := Say("ja", "unknown_command", "name", "foo"), "`!foo` というコマンドはありません。"; got != want {
		t.Errorf("Say(ja) = %q, want %q", got, want)
	}
	if got, want := Say("fr", "unknown_command", "name", "foo"), "I don't know the command `!foo`."; got != want {
		t.Errorf("Say(fr) = %q, want the English %q", got, want)
	}
}

// TestMovementText: a piece of one movement reads "1 movement", not its
// budget of movement runs; a longer piece names the movement and its
// place; runs are counted once a movement repeats.
func TestMovementText(t *testing.T) {
	chat := &piece.Piece{Name: "chat", MaxMovements: 10, Movements: []piece.Movement{{Name: "answer"}}}
	piv := &piece.Piece{Name: "plan-implement-verify", MaxMovements: 10, Movements: []piece.Movement{{Name: "plan"}, {Name: "implement"}, {Name: "verify"}}}
	for _, c := range []struct {
		locale   string
		p        *piece.Piece
		movement string
		count    int
		want     string
	}{
		{"en", chat, "answer", 1, "1 movement"},
		{"en", chat, "answer", 0, "1 movement"},
		{"en", chat, "answer", 2, "1 movement, run 2 of at most 10"},
		{"en", piv, "plan", 1, "movement plan (1 of 3)"},
		{"en", piv, "verify", 3, "movement verify (3 of 3)"},
		{"en", piv, "implement", 4, "movement implement (2 of 3), run 4 of at most 10"},
		{"en", piv, "gone", 1, "movement gone"},
		{"en", nil, "answer", 1, "movement answer"},
		{"en", nil, "", 0, "movement -"},
		{"ja", chat, "answer", 1, "movement 1 つ"},
		{"ja", piv, "implement", 4, "movement implement（3 中 2 番目）、4 回目（上限 10）"},
	} {
		if got := MovementText(c.locale, c.p, c.movement, c.count); got != c.want {
			t.Errorf("MovementText(%s, %v, %q, %d) = %q, want %q", c.locale, c.p != nil, c.movement, c.count, got, c.want)
		}
	}
}
