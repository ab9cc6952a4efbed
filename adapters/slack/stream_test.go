package slack

import (
	"testing"

	"github.com/baton-bot/baton/core/chat"
	"github.com/slack-go/slack"
)

// TestForgottenStreamTextNotDoubled: a stream message the Poster has no
// memory of (another gateway started it, or this one restarted) gets its
// cards again but not the text already in it; what is written after that
// is appended once.
func TestForgottenStreamTextNotDoubled(t *testing.T) {
	var s streams
	v := chat.ProgressView{Piece: "chat", Current: 2,
		Plan: []chat.ProgressStep{{ID: "mv:1", Title: "plan", State: chat.StepComplete}, {ID: "mv:2", Title: "do", State: chat.StepInProgress}},
		Text: "Half of the answer"}
	chunks, record := s.chunks("1700000000.000100", v)
	record("1700000000.000100")
	var texts, plans int
	for _, c := range chunks {
		switch c.(type) {
		case slack.MarkdownTextChunk, *slack.MarkdownTextChunk:
			texts++
		case slack.PlanUpdateChunk, *slack.PlanUpdateChunk:
			plans++
		}
	}
	if texts != 0 || plans != 1 || len(chunks) != 3 {
		t.Errorf("forgotten stream: %d chunks, %d of text, %d plan updates; want the current plan update and both cards, no text: %#v", len(chunks), texts, plans, chunks)
	}
	v.Text += ", and the rest."
	chunks, _ = s.chunks("1700000000.000100", v)
	if len(chunks) != 1 {
		t.Fatalf("after more text: %#v, want one text chunk", chunks)
	}
	if c, ok := chunks[0].(slack.MarkdownTextChunk); !ok || c.Text != ", and the rest." {
		t.Errorf("after more text: %#v, want the new text alone", chunks[0])
	}
}
