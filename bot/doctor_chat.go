package main

// baton doctor's checks of the chat platforms: the token prefixes (cheap,
// also at start), Slack's Web API and Discord's REST API at the URLs the
// configuration names.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"unicode"

	"gopkg.in/yaml.v3"

	"github.com/baton-bot/baton/configs"
)

// tokenKinds names Slack's token prefixes, to say what a misplaced token
// is.
var tokenKinds = []struct{ prefix, kind string }{
	{"xoxb-", "a bot token"},
	{"xapp-", "an app-level token"},
	{"xoxp-", "a user token"},
	{"xoxe", "a refresh or configuration token"},
}

// tokenProblem says what is wrong with a token that must start with want,
// or "" when nothing is. It names at most the token's known prefix, never
// more of it.
func tokenProblem(tok Secret, want string) string {
	v := tok.Reveal()
	switch {
	case v == "":
		return "is empty"
	case strings.TrimSpace(v) != v:
		return "has spaces or a line ending around it (a .env saved with Windows line endings?)"
	case strings.HasPrefix(v, want):
		return ""
	}
	for _, k := range tokenKinds {
		if strings.HasPrefix(v, k.prefix) {
			return fmt.Sprintf("starts with %s: that is %s, not one that starts with %s", k.prefix, k.kind, want)
		}
	}
	return "does not start with " + want
}

// tokenChecks checks the prefixes of the enabled adapters' tokens: Slack's
// bot token is xoxb-…, its app-level token (socket mode) xapp-…. Each
// problem names the key and the variable to change.
func tokenChecks(cfg Config) []check {
	if !cfg.Slack.Enabled {
		return nil
	}
	type token struct {
		key, env, want, what string
		val                  Secret
	}
	tokens := []token{{"slack.bot_token", "SLACK_BOT_TOKEN", "xoxb-", "the Bot User OAuth Token, xoxb-… (OAuth & Permissions)", cfg.Slack.BotToken}}
	if cfg.Slack.Mode == "socket" {
		tokens = append(tokens, token{"slack.app_token", "SLACK_APP_TOKEN", "xapp-", "an App-Level Token with connections:write, xapp-… (Basic Information → App-Level Tokens)", cfg.Slack.AppToken})
	}
	swapped := len(tokens) == 2 && strings.HasPrefix(cfg.Slack.BotToken.Reveal(), "xapp-") && strings.HasPrefix(cfg.Slack.AppToken.Reveal(), "xoxb-")
	var out []check
	for _, t := range tokens {
		p := tokenProblem(t.val, t.want)
		if p == "" {
			out = append(out, passed(t.key, fmt.Sprintf("%s starts with %s", t.env, t.want)))
			continue
		}
		fix := fmt.Sprintf("set %s to %s", t.env, t.what)
		if swapped {
			fix = "SLACK_BOT_TOKEN and SLACK_APP_TOKEN look swapped: exchange them"
		}
		out = append(out, failure(t.key, fmt.Sprintf("%s (%s) %s", t.key, t.env, p), fix))
	}
	return out
}

// manifestScopes are the bot scopes the Slack app manifest asks for.
func manifestScopes() ([]string, error) {
	var m struct {
		OAuth struct {
			Scopes struct {
				Bot []string `yaml:"bot"`
			} `yaml:"scopes"`
		} `yaml:"oauth_config"`
	}
	if err := yaml.Unmarshal(configs.SlackManifest, &m); err != nil {
		return nil, fmt.Errorf("the Slack manifest: %w", err)
	}
	return m.OAuth.Scopes.Bot, nil
}

// slackAnswer is the part of a Web API answer the checks read.
type slackAnswer struct {
	OK     bool   `json:"ok"`
	Error  string `json:"error"`
	Needed string `json:"needed"` // missing_scope: the scope
	User   string `json:"user"`
	Team   string `json:"team"`
	TeamID string `json:"team_id"`
}

// slackCall calls a Web API method at the configured slack.api_url with
// token, as the adapter does.
func (d *doctor) slackCall(ctx context.Context, method string, token Secret) (slackAnswer, http.Header, error) {
	ctx, cancel := context.WithTimeout(ctx, doctorTimeout)
	defer cancel()
	base := d.cfg.Slack.APIURL
	if !strings.HasSuffix(base, "/") {
		base += "/"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+method, strings.NewReader(url.Values{}.Encode()))
	if err != nil {
		return slackAnswer{}, nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "Bearer "+token.Reveal())
	resp, err := d.hc.Do(req)
	if err != nil {
		return slackAnswer{}, nil, fmt.Errorf("Slack's Web API at %s does not answer (%s)", shownURL(d.cfg.Slack.APIURL), netReason(err))
	}
	defer resp.Body.Close()
	var a slackAnswer
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&a); err != nil {
		return slackAnswer{}, nil, fmt.Errorf("Slack's Web API at %s answered %s with no JSON", shownURL(d.cfg.Slack.APIURL), resp.Status)
	}
	return a, resp.Header, nil
}

// slack checks the Slack app when the adapter is on: the tokens' prefixes,
// auth.test with the bot token and its scopes against the manifest's, the
// app token with apps.connections.open (socket mode) or the signing secret
// (HTTP mode).
func (d *doctor) slack(ctx context.Context) []check {
	c := d.cfg.Slack
	if !c.Enabled {
		return []check{skipped("slack", "off (slack.enabled is false)")}
	}
	out := tokenChecks(d.cfg)
	if c.BotToken != "" {
		out = append(out, d.slackAuth(ctx)...)
	}
	switch c.Mode {
	case "socket":
		if c.AppToken != "" {
			out = append(out, d.slackSocket(ctx))
		}
	case "http":
		if c.SigningSecret == "" {
			out = append(out, failure("slack.signing_secret", "slack.mode is http and no signing secret is set: every event would be refused",
				"set SLACK_SIGNING_SECRET to the app's Signing Secret (Basic Information → App Credentials)"))
		} else {
			out = append(out, passed("slack.signing_secret", fmt.Sprintf("set; Slack must reach /slack/events, /slack/commands and /slack/interactions over HTTPS, through a proxy in front of http.addr %s", d.cfg.HTTP.Addr)))
		}
	}
	return out
}

// slackAuth runs auth.test with the bot token and compares the scopes it
// reports with the manifest's.
func (d *doctor) slackAuth(ctx context.Context) []check {
	a, h, err := d.slackCall(ctx, "auth.test", d.cfg.Slack.BotToken)
	if err != nil {
		return []check{failure("slack.auth", err.Error(), "check the network, or slack.api_url")}
	}
	if !a.OK {
		return []check{failure("slack.auth", fmt.Sprintf("Slack refused SLACK_BOT_TOKEN in auth.test (%s)", a.Error),
			"set SLACK_BOT_TOKEN to the app's Bot User OAuth Token (OAuth & Permissions; reinstall the app if it was revoked)")}
	}
	out := []check{passed("slack.auth", fmt.Sprintf("the bot token works: @%s in workspace %s (%s)", a.User, a.Team, a.TeamID))}
	want, err := manifestScopes()
	if err != nil {
		return append(out, warning("slack.scopes", err.Error(), "report this: the manifest is built into Baton"))
	}
	header := h.Get("X-OAuth-Scopes")
	if header == "" {
		return append(out, warning("slack.scopes", "Slack did not report the bot token's scopes", "compare OAuth & Permissions → Bot Token Scopes with configs/slack-app-manifest.yaml"))
	}
	var granted []string
	for s := range strings.SplitSeq(header, ",") {
		granted = append(granted, strings.TrimSpace(s))
	}
	var missing []string
	for _, s := range want {
		if !slices.Contains(granted, s) {
			missing = append(missing, s)
		}
	}
	if len(missing) > 0 {
		return append(out, failure("slack.scopes", fmt.Sprintf("the bot token lacks %s the manifest asks for: %s", plural(len(missing), "scope", "scopes"), strings.Join(missing, ", ")),
			"add them under OAuth & Permissions → Bot Token Scopes (or update the app from configs/slack-app-manifest.yaml), then reinstall the app"))
	}
	return append(out, passed("slack.scopes", fmt.Sprintf("the bot token has the %d scopes of the manifest", len(want))))
}

// slackSocket checks the app-level token by asking for a Socket Mode URL.
func (d *doctor) slackSocket(ctx context.Context) check {
	const name = "slack.socket"
	a, _, err := d.slackCall(ctx, "apps.connections.open", d.cfg.Slack.AppToken)
	switch {
	case err != nil:
		return failure(name, err.Error(), "check the network, or slack.api_url")
	case a.OK:
		return passed(name, "the app token opens Socket Mode connections")
	case a.Error == "not_allowed_token_type":
		return failure(name, "SLACK_APP_TOKEN is not an app-level token (apps.connections.open: not_allowed_token_type)",
			"set SLACK_APP_TOKEN to an App-Level Token with connections:write (Basic Information → App-Level Tokens, xapp-…)")
	case a.Error == "missing_scope":
		return failure(name, "the app token lacks connections:write (apps.connections.open: missing_scope)",
			"create an App-Level Token with the connections:write scope and set SLACK_APP_TOKEN to it")
	}
	return failure(name, fmt.Sprintf("Slack refused SLACK_APP_TOKEN in apps.connections.open (%s)", a.Error),
		"set SLACK_APP_TOKEN to the app's App-Level Token (Basic Information → App-Level Tokens), and make sure Socket Mode is on for the app")
}

// The application flags that say the Message Content intent is on
// (Discord's GATEWAY_MESSAGE_CONTENT and GATEWAY_MESSAGE_CONTENT_LIMITED).
const discordMessageContent = 1<<18 | 1<<19

// discordPermissions is the permission integer of Baton's invite URL: View
// Channels, Send Messages, Send Messages in Threads, Create Public Threads,
// Read Message History, Add Reactions, Attach Files, Use Application
// Commands (the README's Discord section lists the same).
const discordPermissions = "311385230400"

// discordInvite is the URL that adds the bot of application appID to a
// server with the permissions Baton uses.
func discordInvite(appID string) string {
	return "https://discord.com/oauth2/authorize?client_id=" + url.QueryEscape(appID) + "&scope=bot%20applications.commands&permissions=" + discordPermissions
}

// discordCall sends GET path at the configured discord.api_url with the
// bot token, decoding a 200 answer into v; it returns the status and, for
// an error status, Discord's words for it ("Missing Access (50001)").
func (d *doctor) discordCall(ctx context.Context, path string, v any) (int, string, error) {
	ctx, cancel := context.WithTimeout(ctx, doctorTimeout)
	defer cancel()
	base := d.cfg.Discord.APIURL
	if !strings.HasSuffix(base, "/") {
		base += "/"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Authorization", "Bot "+d.cfg.Discord.BotToken.Reveal())
	resp, err := d.hc.Do(req)
	if err != nil {
		return 0, "", fmt.Errorf("Discord's API at %s does not answer (%s)", shownURL(d.cfg.Discord.APIURL), netReason(err))
	}
	defer resp.Body.Close()
	body := io.LimitReader(resp.Body, 1<<20)
	if resp.StatusCode != http.StatusOK {
		why := fmt.Sprintf("%d %s", resp.StatusCode, http.StatusText(resp.StatusCode))
		var e struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		}
		if json.NewDecoder(body).Decode(&e) == nil && e.Message != "" && e.Code != 0 {
			why += fmt.Sprintf(": %s (%d)", clip(printable(e.Message), 100), e.Code)
		}
		return resp.StatusCode, why, nil
	}
	if v != nil {
		if err := json.NewDecoder(body).Decode(v); err != nil {
			return resp.StatusCode, "", fmt.Errorf("Discord's API at %s answered %s with no JSON", shownURL(d.cfg.Discord.APIURL), path)
		}
	}
	return resp.StatusCode, "", nil
}

// printable drops control characters, so that a server's words cannot
// break the line they are shown in.
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return -1
		}
		return r
	}, s)
}

// discord checks the Discord bot when the adapter is on: the token, the
// application (its id and the Message Content intent) and, with
// discord.guild_id, that commands can be registered in that server.
func (d *doctor) discord(ctx context.Context) []check {
	c := d.cfg.Discord
	if !c.Enabled {
		return []check{skipped("discord", "off (discord.enabled is false)")}
	}
	tokenFix := "set DISCORD_BOT_TOKEN to the bot's token (Developer Portal → your application → Bot → Reset Token)"
	if c.BotToken == "" {
		return []check{failure("discord.token", "discord.bot_token (DISCORD_BOT_TOKEN) is empty", tokenFix)}
	}
	if v := c.BotToken.Reveal(); strings.TrimSpace(v) != v {
		return []check{failure("discord.token", "discord.bot_token (DISCORD_BOT_TOKEN) has spaces or a line ending around it (a .env saved with Windows line endings?)", tokenFix)}
	}
	var me struct {
		ID       string `json:"id"`
		Username string `json:"username"`
	}
	status, why, err := d.discordCall(ctx, "users/@me", &me)
	switch {
	case err != nil:
		return []check{failure("discord.token", err.Error(), "check the network, or discord.api_url")}
	case status == http.StatusUnauthorized:
		return []check{failure("discord.token", "Discord refused DISCORD_BOT_TOKEN (401 Unauthorized)", tokenFix)}
	case status != http.StatusOK:
		return []check{failure("discord.token", "Discord answered users/@me with "+why, "try again later; check discord.api_url")}
	}
	out := []check{passed("discord.token", fmt.Sprintf("the token works: bot %s (user id %s)", me.Username, me.ID))}
	var app struct {
		ID    string `json:"id"`
		Flags int64  `json:"flags"`
	}
	status, why, err = d.discordCall(ctx, "applications/@me", &app)
	switch {
	case err != nil:
		return append(out, failure("discord.application", err.Error(), "check the network, or discord.api_url"))
	case status != http.StatusOK:
		return append(out, failure("discord.application", "Discord answered applications/@me with "+why, "try again later; check discord.api_url"))
	}
	out = append(out, passed("discord.application", fmt.Sprintf("application id %s; invite the bot with %s", app.ID, discordInvite(app.ID))))
	if app.Flags&discordMessageContent == 0 {
		out = append(out, failure("discord.intent", "the Message Content intent is off: Discord would close the gateway with 4014 Disallowed intent(s)",
			"switch on Message Content Intent (Developer Portal → your application → Bot → Privileged Gateway Intents)"))
	} else {
		out = append(out, passed("discord.intent", "the Message Content intent is on"))
	}
	if c.GuildID == "" {
		return append(out, skipped("discord.guild", "discord.guild_id is empty: /baton is registered globally (it takes up to an hour to show)"))
	}
	status, why, err = d.discordCall(ctx, "applications/"+url.PathEscape(app.ID)+"/guilds/"+url.PathEscape(c.GuildID)+"/commands", nil)
	switch {
	case err != nil:
		return append(out, failure("discord.guild", err.Error(), "check the network, or discord.api_url"))
	case status == http.StatusOK:
		return append(out, passed("discord.guild", fmt.Sprintf("/baton can be registered in server %s", c.GuildID)))
	case status == http.StatusForbidden || status == http.StatusNotFound:
		return append(out, failure("discord.guild", fmt.Sprintf("Discord refuses command registration in server %s (%s): the bot is not in it, or was invited without applications.commands", c.GuildID, why),
			fmt.Sprintf("invite it with %s, or correct discord.guild_id", discordInvite(app.ID))))
	}
	return append(out, failure("discord.guild", fmt.Sprintf("Discord answered the commands of server %s with %s", c.GuildID, why), "try again later"))
}
