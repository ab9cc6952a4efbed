package slack

import (
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gopkg.in/yaml.v3"
)

// manifestPath is the shipped Slack app manifest.
const manifestPath = "../../configs/slack-app-manifest.yaml"

// manifest is the part of the app manifest the tests read.
type manifest struct {
	Features struct {
		SlashCommands []struct {
			Command string `yaml:"command"`
		} `yaml:"slash_commands"`
	} `yaml:"features"`
	OAuth struct {
		Scopes struct {
			Bot []string `yaml:"bot"`
		} `yaml:"scopes"`
	} `yaml:"oauth_config"`
	Settings struct {
		Events struct {
			Bot []string `yaml:"bot_events"`
		} `yaml:"event_subscriptions"`
		SocketMode    bool `yaml:"socket_mode_enabled"`
		Interactivity struct {
			Enabled bool `yaml:"is_enabled"`
		} `yaml:"interactivity"`
	} `yaml:"settings"`
}

func readManifest(t *testing.T) (manifest, []byte) {
	t.Helper()
	b, err := os.ReadFile(manifestPath)
	if err != nil {
		t.Fatal(err)
	}
	var m manifest
	if err := yaml.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m, b
}

// TestManifest checks that the shipped app manifest subscribes to what the
// adapter handles.
func TestManifest(t *testing.T) {
	m, b := readManifest(t)
	// The scopes are TestManifestScopes's.
	events := []string{"app_mention", "message.channels", "message.groups", "message.im", "message.mpim", "reaction_added"}
	if diff := cmp.Diff(events, m.Settings.Events.Bot); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if len(m.Features.SlashCommands) != 1 || m.Features.SlashCommands[0].Command != "/baton" || !m.Settings.SocketMode {
		t.Errorf("slash commands %+v, socket mode %v; want /baton and socket mode", m.Features.SlashCommands, m.Settings.SocketMode)
	}
	// Buttons (approvals, Stop, Retry) need interactivity; in HTTP mode
	// its request URL is the handler's, named in the comment to uncomment.
	if !m.Settings.Interactivity.Enabled {
		t.Error("interactivity is not enabled: clicks on Baton's buttons would never arrive")
	}
	for _, url := range []string{"/slack/events", "/slack/commands", "/slack/interactions"} {
		if !strings.Contains(string(b), "https://baton.example.com"+url) {
			t.Errorf("the manifest does not name the HTTP-mode URL %s", url)
		}
	}
}
