package discord

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/baton-bot/baton/adapters/discord/discordfake"
	"github.com/baton-bot/baton/core/chat"
)

// collector is a Service that keeps the messages handed to it.
type collector struct {
	nopService
	mu   sync.Mutex
	msgs []chat.Message // guarded by mu
}

func (c *collector) HandleMessage(_ context.Context, m chat.Message) (chat.Reply, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.msgs = append(c.msgs, m)
	return chat.Reply{}, nil
}

// discordSeeds are MESSAGE_CREATE payloads shaped as Discord documents
// its message object: a mention, a reply, a sticker, an attachment, a DM,
// a system message, and broken ones.
var discordSeeds = []string{
	`{"id":"7001","channel_id":"200","guild_id":"100","type":0,"content":"<@900> ask <@43> (<@&77>) in <#200> <:party:1> <a:x:2> <t:1618953630:R> </baton:3>",
	  "author":{"id":"42","username":"alice"},"mentions":[{"id":"900","username":"baton","bot":true},{"id":"43","username":"bob","global_name":"Bob"}],
	  "mention_roles":["77"],"timestamp":"2021-04-20T21:20:30Z"}`,
	`{"id":"7002","channel_id":"200","guild_id":"100","type":19,"content":"thanks","author":{"id":"42","username":"alice"},
	  "mentions":[{"id":"900","username":"baton","bot":true}],"message_reference":{"message_id":"6100","channel_id":"200"},
	  "referenced_message":{"id":"6100","channel_id":"200","content":"hi","author":{"id":"900","username":"baton","bot":true}}}`,
	`{"id":"7003","channel_id":"300","type":0,"content":"","author":{"id":"42","username":"alice"},
	  "sticker_items":[{"id":"749054660769218631","name":"Wave","format_type":1}]}`,
	`{"id":"7004","channel_id":"300","type":0,"content":"<@!900> read","author":{"id":"42","username":"alice"},
	  "attachments":[{"id":"a1","filename":"notes.txt","size":17,"url":"http://127.0.0.1:1/files/notes.txt"}]}`,
	`{"id":"7005","channel_id":"200","guild_id":"100","type":0,"content":"<@900> verified","author":{"id":"643945264868098049","username":"Discord","system":true}}`,
	`{"id":"7006","channel_id":"404","guild_id":"100","type":0,"content":"<@900> <#<@&> <t::R> <:x:> <a::1> <@>","author":{"id":"42"},"mentions":[null]}`,
	`{"id":"7007","channel_id":"200","type":7,"content":"","author":{"id":"42"}}`,
	`{"author":null}`,
	`{"mentions":[{}],"sticker_items":[null],"referenced_message":{"author":null},"type":19,"author":{"id":"1"}}`,
	`[]`,
}

// FuzzMessageCreate: any MESSAGE_CREATE payload is parsed, filtered and
// handed over (its text made readable) without a panic, the bot's own
// mention never reaches the service, and text that was valid UTF-8 stays
// so.
func FuzzMessageCreate(f *testing.F) {
	for _, s := range discordSeeds {
		f.Add(s)
	}
	fake := discordfake.New(f)
	svc := &collector{}
	a, _ := newAdapter(f, svc, Config{APIURL: fake.APIURL(), IgnoreBots: true})
	bot := discordfake.Bot
	a.botID.Store(&bot)
	f.Fuzz(func(t *testing.T, payload string) {
		var e discordgo.MessageCreate
		if err := json.Unmarshal([]byte(payload), &e); err != nil {
			return // the gateway drops an event it cannot read
		}
		if !a.wanted(e.Message, bot) {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		a.message(ctx, e.Message, bot)
		svc.mu.Lock()
		defer svc.mu.Unlock()
		for _, m := range svc.msgs {
			if strings.Contains(m.Text, "<@"+bot+">") || strings.Contains(m.Text, "<@!"+bot+">") {
				t.Fatalf("the bot's mention reached the service: %q", m.Text)
			}
		}
		svc.msgs = nil
	})
}
