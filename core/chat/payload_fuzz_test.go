package chat_test

import (
	"reflect"
	"testing"

	"github.com/baton-bot/baton/core/chat"
)

// FuzzPayload: an outbox payload that decodes encodes back to one that
// decodes to the same payload; anything else is an error, never a panic.
func FuzzPayload(f *testing.F) {
	f.Add(chat.Payload{Text: "hello *world*", MsgID: "1700000000.000100"}.Encode())
	f.Add(chat.Payload{Emoji: chat.EmojiClaimed, MsgID: "m"}.Encode())
	f.Add(chat.Payload{Path: "/data/workspaces/1/output/a.txt", Name: "a.txt"}.Encode())
	f.Add(chat.Payload{Text: "approve?", Buttons: []chat.Button{{Action: "approve:1.2", Label: "Approve", Style: chat.StylePrimary}}}.Encode())
	f.Add(`{"buttons":[{"action":1}]}`)
	f.Add(`{"buttons":[]}`)
	f.Add(`{"text":1}`)
	f.Add(`{"text":"\ud800"}`)
	f.Add(`[]`)
	f.Fuzz(func(t *testing.T, s string) {
		p, err := chat.DecodePayload(s)
		if err != nil {
			return
		}
		again, err := chat.DecodePayload(p.Encode())
		if err != nil {
			t.Fatalf("re-encoded payload does not decode: %v", err)
		}
		if len(p.Buttons) == 0 {
			p.Buttons = nil // no buttons, however spelled
		}
		if !reflect.DeepEqual(again, p) {
			t.Errorf("round trip changed the payload: %+v → %+v", p, again)
		}
	})
}
