package main

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/bwmarrin/discordgo"
	"gopkg.in/yaml.v3"
)

// readmeSection returns the README's "## title" section.
func readmeSection(t *testing.T, title string) string {
	t.Helper()
	b, err := os.ReadFile(readmePath)
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "\n## "+title+"\n")
	if !ok {
		t.Fatalf("%s has no section %q", readmePath, title)
	}
	if i := strings.Index(rest, "\n## "); i >= 0 {
		rest = rest[:i]
	}
	return rest
}

// readmeDiscordPermissions are the permissions the README's invite URL may list,
// by the names Discord's settings show.
var readmeDiscordPermissions = map[string]int64{
	"View Channels":            discordgo.PermissionViewChannel,
	"Send Messages":            discordgo.PermissionSendMessages,
	"Send Messages in Threads": discordgo.PermissionSendMessagesInThreads,
	"Create Public Threads":    discordgo.PermissionCreatePublicThreads,
	"Read Message History":     discordgo.PermissionReadMessageHistory,
	"Add Reactions":            discordgo.PermissionAddReactions,
	"Attach Files":             discordgo.PermissionAttachFiles,
	"Embed Links":              discordgo.PermissionEmbedLinks,
	"Use Application Commands": discordgo.PermissionUseApplicationCommands,
}

// TestReadmeDiscordPermissions: the permissions integer of the README's
// invite URL is the sum of the permissions listed after it.
func TestReadmeDiscordPermissions(t *testing.T) {
	sec := readmeSection(t, "Discord")
	m := regexp.MustCompile("permissions=([0-9]+)`\\s*\\(([^)]*)\\)").FindStringSubmatch(sec)
	if m == nil {
		t.Fatal("the Discord section has no invite URL followed by its permissions in parentheses")
	}
	got, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	var want int64
	names := strings.Split(m[2], ",")
	for _, n := range names {
		n = strings.TrimSpace(n)
		p, ok := readmeDiscordPermissions[n]
		if !ok {
			t.Errorf("the README lists the permission %q, unknown to the test (readmeDiscordPermissions)", n)
			continue
		}
		if want&p != 0 {
			t.Errorf("the README lists %q twice", n)
		}
		want |= p
	}
	if got != want {
		t.Errorf("invite URL permissions=%d, but %s add up to %d", got, strings.TrimSpace(m[2]), want)
	}
}

// TestReadmeSlackManifest: the README's Slack section names every event
// the manifest subscribes to, and says HTTP mode needs HTTPS in front with
// a reverse-proxy example that forwards /slack/.
func TestReadmeSlackManifest(t *testing.T) {
	sec := readmeSection(t, "Slack")
	b, err := os.ReadFile("../configs/slack-app-manifest.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var man struct {
		Settings struct {
			Events struct {
				Bot []string `yaml:"bot_events"`
			} `yaml:"event_subscriptions"`
		} `yaml:"settings"`
	}
	if err := yaml.Unmarshal(b, &man); err != nil {
		t.Fatal(err)
	}
	if len(man.Settings.Events.Bot) == 0 {
		t.Fatal("the manifest subscribes to no events")
	}
	for _, ev := range man.Settings.Events.Bot {
		if !strings.Contains(sec, "`"+ev+"`") {
			t.Errorf("the README's Slack section does not name the event %s the manifest subscribes to", ev)
		}
	}
	for _, want := range []string{"https://", "reverse proxy", "reverse_proxy /slack/* 127.0.0.1:8080"} {
		if !strings.Contains(sec, want) {
			t.Errorf("the README's Slack section does not say %q (HTTP mode needs HTTPS in front)", want)
		}
	}
}
