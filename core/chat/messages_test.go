package chat

import "testing"

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
