package slack

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/slack-go/slack"
)

// webAPIScopes maps each slack-go client method the adapter may call to
// the Web API method it calls and the bot scopes that needs. A method the
// adapter calls must be here; the manifest must ask for exactly the scopes
// of the methods called, of the events subscribed and of the slash command.
// Socket Mode's apps.connections.open is called with the app-level token
// (its connections:write is not a bot scope), and response_url webhooks
// need none.
var webAPIScopes = map[string]struct {
	method string
	scopes []string
}{
	"AuthTestContext":      {"auth.test", nil},
	"PostMessageContext":   {"chat.postMessage", []string{"chat:write"}},
	"PostEphemeralContext": {"chat.postEphemeral", []string{"chat:write"}},
	"UpdateMessageContext": {"chat.update", []string{"chat:write"}},
	// A job's live progress: one streaming message.
	"StartStreamContext":               {"chat.startStream", []string{"chat:write"}},
	"SetAssistantThreadsStatusContext": {"assistant.threads.setStatus", []string{"chat:write"}},
	"AppendStreamContext":              {"chat.appendStream", []string{"chat:write"}},
	"StopStreamContext":                {"chat.stopStream", []string{"chat:write"}},
	"AddReactionContext":               {"reactions.add", []string{"reactions:write"}},
	"RemoveReactionContext":            {"reactions.remove", []string{"reactions:write"}},
	// A thread's history, in every kind of conversation Baton works in:
	// public and private channels, direct and group direct messages.
	"GetConversationRepliesContext": {"conversations.replies", []string{"channels:history", "groups:history", "im:history", "mpim:history"}},
	// A direct-message channel's history: there the deliverer looks for
	// a post it may have made (Poster.FindDelivered).
	"GetConversationHistoryContext": {"conversations.history", []string{"channels:history", "groups:history", "im:history", "mpim:history"}},
	// files.info, and the download of url_private that follows.
	"GetFileInfoContext":         {"files.info", []string{"files:read"}},
	"UploadFileContext":          {"files.getUploadURLExternal, files.completeUploadExternal", []string{"files:write"}},
	"GetUserInfoContext":         {"users.info", []string{"users:read"}},
	"GetUserGroupMembersContext": {"usergroups.users.list", []string{"usergroups:read"}},
}

// eventScopes maps each event the manifest may subscribe to to the bot
// scope it needs.
var eventScopes = map[string]string{
	"app_mention":      "app_mentions:read",
	"message.channels": "channels:history",
	"message.groups":   "groups:history",
	"message.im":       "im:history",
	"message.mpim":     "mpim:history",
	"reaction_added":   "reactions:read",
}

// clientCalls returns the slack-go client methods the package's own code
// (not its tests) calls, with where: every call X.M(…) where M, or
// M+"Context", is a Web API method of *slack.Client (the narrow interfaces
// the adapter declares name the same methods).
func clientCalls(t *testing.T) map[string][]string {
	t.Helper()
	methods := map[string]bool{}
	ct := reflect.TypeOf(&slack.Client{})
	for i := range ct.NumMethod() {
		methods[ct.Method(i).Name] = true
	}
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	calls := map[string][]string{}
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if pkg, ok := sel.X.(*ast.Ident); ok && pkg.Name == "slack" {
				return true // a package function (slack.New, webhooks), not a client call
			}
			// Every Web API method has a …Context form: a name without one
			// (a logger's Debug) is not a client call, and a call of the
			// form without ctx counts as its Context form.
			name := sel.Sel.Name
			if !strings.HasSuffix(name, "Context") {
				name += "Context"
			}
			if !methods[name] {
				return true
			}
			calls[name] = append(calls[name], fset.Position(call.Pos()).String())
			return true
		})
	}
	return calls
}

// TestManifestScopes: the manifest's bot scopes are exactly those the
// adapter's Web API calls, its events and its slash command need; and a
// conversation kind whose history is asked for has its message events
// subscribed.
func TestManifestScopes(t *testing.T) {
	m, _ := readManifest(t)
	ct := reflect.TypeOf(&slack.Client{})
	for name := range webAPIScopes {
		if _, ok := ct.MethodByName(name); !ok {
			t.Errorf("webAPIScopes names %s, which *slack.Client does not have", name)
		}
	}
	calls := clientCalls(t)
	if len(calls) < 5 {
		t.Fatalf("only %d client calls found (%v): the scan is broken", len(calls), calls)
	}
	need := map[string][]string{} // scope → what needs it
	for name, where := range calls {
		s, ok := webAPIScopes[name]
		if !ok {
			t.Errorf("the adapter calls %s (%s): add it to webAPIScopes with its Web API method's scopes", name, where[0])
			continue
		}
		for _, sc := range s.scopes {
			need[sc] = append(need[sc], s.method)
		}
	}
	for name := range webAPIScopes {
		if _, ok := calls[name]; !ok {
			t.Errorf("webAPIScopes lists %s, which the adapter no longer calls: remove it", name)
		}
	}
	for _, ev := range m.Settings.Events.Bot {
		sc, ok := eventScopes[ev]
		if !ok {
			t.Errorf("the manifest subscribes to %s: add it to eventScopes with its scope", ev)
			continue
		}
		need[sc] = append(need[sc], "event "+ev)
	}
	if len(m.Features.SlashCommands) > 0 {
		need["commands"] = append(need["commands"], "the slash command")
	}

	asked := m.OAuth.Scopes.Bot
	for sc, by := range need {
		if !slices.Contains(asked, sc) {
			t.Errorf("the manifest does not ask for %s, which %s needs", sc, strings.Join(by, ", "))
		}
	}
	for _, sc := range asked {
		if _, ok := need[sc]; !ok {
			t.Errorf("the manifest asks for %s, which nothing the adapter calls or subscribes to needs: drop it", sc)
		}
	}
	if len(asked) != len(slices.Compact(slices.Sorted(slices.Values(asked)))) {
		t.Errorf("the manifest asks for a scope twice: %v", asked)
	}

	// Reading a kind of conversation's history goes with hearing its
	// messages: without message.mpim a group DM's thread replies never
	// arrive, though its history is readable.
	var kinds []string
	for _, sc := range asked {
		if kind, ok := strings.CutSuffix(sc, ":history"); ok {
			kinds = append(kinds, kind)
			if !slices.Contains(m.Settings.Events.Bot, "message."+kind) {
				t.Errorf("the manifest asks for %s but does not subscribe to message.%s", sc, kind)
			}
		}
	}
	sort.Strings(kinds)
	if want := []string{"channels", "groups", "im", "mpim"}; !slices.Equal(kinds, want) {
		t.Errorf("history scopes for %v, want %v", kinds, want)
	}
}
