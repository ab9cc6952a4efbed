package chat

import "testing"

func TestEveryTextInEveryLocale(t *testing.T) {
	for key := range texts["en"] {
		if texts["ja"][key] == "" {
			t.Errorf("text %q has no Japanese", key)
		}
	}
	for key := range texts["ja"] {
		if texts["en"][key] == "" {
			t.Errorf("text %q has no English", key)
		}
	}
}

func TestMentionID(t *testing.T) {
	for id, want := range map[string]string{"slack:U1": "<@U1>", "discord:42": "<@42>", "console:alice": "alice", "api:ci": "ci", "bare": "bare"} {
		if got := mentionID(id); got != want {
			t.Errorf("mentionID(%q) = %q, want %q", id, got, want)
		}
	}
}
