package main

// baton init: a first setup. It asks (on a terminal) or takes from flags
// which platforms to use and which model endpoint, writes baton.yaml and
// .env, prints what to paste into Slack and the Discord invite URL, and
// runs baton doctor on what it wrote.

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/baton-bot/baton/configs"
)

// provider is a kind of model endpoint baton init knows.
type provider struct {
	name    string
	baseURL string   // "" when there is no usual one
	model   string   // "" when it must be asked or listed
	keyEnvs []string // where a key for it usually is, in order
}

var providers = []provider{
	{name: "openai", baseURL: "https://api.openai.com/v1", model: "gpt-4.1-mini", keyEnvs: []string{"OPENAI_API_KEY"}},
	{name: "ollama", baseURL: "http://localhost:11434/v1", model: "llama3.1"},
	{name: "vllm", baseURL: "http://localhost:8000/v1"},
	{name: "openrouter", baseURL: "https://openrouter.ai/api/v1", model: "openai/gpt-4.1-mini", keyEnvs: []string{"OPENROUTER_API_KEY", "OPENAI_API_KEY"}},
	{name: "other"},
}

func providerNames() []string {
	var names []string
	for _, p := range providers {
		names = append(names, p.name)
	}
	return names
}

func lookupProvider(name string) (provider, bool) {
	for _, p := range providers {
		if p.name == name {
			return p, true
		}
	}
	return provider{}, false
}

// setup is what baton init writes.
type setup struct {
	slack    string // socket | http | off
	discord  string // on | off
	provider provider
	baseURL  string
	model    string
	dataDir  string
	appID    string // Discord's application id, for the invite URL; "" unknown
	// Secrets, written to .env only.
	apiKey, slackBot, slackApp, slackSigning, discordToken Secret
}

// initFlags are baton init's flags.
type initFlags struct {
	nonInteractive, force                               bool
	slack, discord, provider, baseURL, model, apiKeyEnv string
	dataDir, appID, config                              string
	given                                               map[string]bool // the flags set on the command line
}

var (
	envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	digits  = regexp.MustCompile(`^[0-9]+$`)
)

func (m *Main) initSetup(ctx context.Context, args []string) error {
	fs := m.newFlagSet("init")
	var f initFlags
	fs.BoolVar(&f.nonInteractive, "non-interactive", false, "ask nothing: take the answers from the flags and the environment (SLACK_BOT_TOKEN, …)")
	fs.StringVar(&f.slack, "slack", "off", "Slack: `socket` (Socket Mode), http (Events API) or off")
	fs.StringVar(&f.discord, "discord", "off", "Discord: `on` or off")
	fs.StringVar(&f.provider, "provider", "openai", "the model endpoint: `openai`, ollama, vllm, openrouter or other")
	fs.StringVar(&f.baseURL, "base-url", "", "the endpoint's API `URL` (default: the provider's usual one)")
	fs.StringVar(&f.model, "model", "", "the `model` (default: the provider's usual one, or the endpoint's only one)")
	fs.StringVar(&f.apiKeyEnv, "api-key-env", "", "the environment `variable` holding the API key, written to .env as OPENAI_API_KEY (default: the provider's usual one, when set)")
	fs.StringVar(&f.dataDir, "data-dir", "./data", "the data `directory` (data_dir)")
	fs.StringVar(&f.appID, "discord-app-id", "", "Discord's Application `ID`, for the invite URL")
	fs.StringVar(&f.config, "config", "baton.yaml", "the config `file` to write; .env is written beside it")
	fs.BoolVar(&f.force, "force", false, "overwrite baton.yaml and .env when they exist")
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := noArgs("init", fs); err != nil {
		return err
	}
	f.given = map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { f.given[fl.Name] = true })
	if err := f.check(); err != nil {
		return err
	}
	if !f.nonInteractive && !isTerminal(m.Stdin) {
		return usageErr("baton init: stdin is not a terminal: pass --non-interactive and the answers as flags (baton init -h lists them)")
	}
	cfgPath := f.config
	envPath := filepath.Join(filepath.Dir(cfgPath), ".env")
	if !f.force {
		for _, p := range []string{cfgPath, envPath} {
			if _, err := os.Lstat(p); err == nil {
				return usageErr("baton init: %s exists: pass --force to overwrite it, or --config to write elsewhere", p)
			}
		}
	}
	var s setup
	var err error
	if f.nonInteractive {
		s, err = m.initFromFlags(ctx, f)
	} else {
		s, err = m.initAsk(ctx, f)
	}
	if err != nil {
		return err
	}
	env, err := s.envFile()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(cfgPath), 0o755); err != nil {
		return fmt.Errorf("baton init: %w", err)
	}
	if err := writeFile(cfgPath, s.configFile(), 0o644, f.force); err != nil {
		return err
	}
	if err := writeFile(envPath, env.text, 0o600, f.force); err != nil {
		return err
	}
	m.initNext(s, cfgPath, envPath)
	fmt.Fprintf(m.Stdout, "\nbaton doctor --config %s:\n", cfgPath)
	// As after `set -a; . ./.env; set +a`: what .env sets wins.
	withEnv := func(k string) string {
		if v, ok := env.vars[k]; ok {
			return v
		}
		return m.Env(k)
	}
	return m.runDoctor(ctx, cfgPath, withEnv, false)
}

// check refuses flag values baton init does not know, naming the flag.
func (f initFlags) check() error {
	if !slices.Contains([]string{"socket", "http", "off"}, f.slack) {
		return usageErr("baton init: --slack: want socket, http or off, got %q", f.slack)
	}
	if !slices.Contains([]string{"on", "off"}, f.discord) {
		return usageErr("baton init: --discord: want on or off, got %q", f.discord)
	}
	if _, ok := lookupProvider(f.provider); !ok {
		return usageErr("baton init: --provider: want one of %s, got %q", strings.Join(providerNames(), ", "), f.provider)
	}
	if f.baseURL != "" && !httpURL(f.baseURL) {
		return usageErr("baton init: --base-url: want an http:// or https:// URL, got %q", f.baseURL)
	}
	if f.apiKeyEnv != "" && !envName.MatchString(f.apiKeyEnv) {
		return usageErr("baton init: --api-key-env: want the name of an environment variable (OPENAI_API_KEY), got %q", f.apiKeyEnv)
	}
	if f.appID != "" && !digits.MatchString(f.appID) {
		return usageErr("baton init: --discord-app-id: want the Application ID (digits, Developer Portal → General Information), got %q", f.appID)
	}
	if strings.TrimSpace(f.dataDir) == "" {
		return usageErr("baton init: --data-dir: must not be empty")
	}
	if strings.TrimSpace(f.config) == "" {
		return usageErr("baton init: --config: must not be empty")
	}
	return nil
}

func httpURL(raw string) bool {
	u, err := url.Parse(raw)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

// initFromFlags takes the answers from the flags and the environment.
func (m *Main) initFromFlags(ctx context.Context, f initFlags) (setup, error) {
	p, _ := lookupProvider(f.provider)
	s := setup{slack: f.slack, discord: f.discord, provider: p, baseURL: f.baseURL, model: f.model, dataDir: f.dataDir, appID: f.appID}
	if s.baseURL == "" {
		if p.baseURL == "" {
			return s, usageErr("baton init: --base-url is required with --provider %s", p.name)
		}
		s.baseURL = p.baseURL
	}
	if f.apiKeyEnv != "" {
		if s.apiKey = Secret(m.Env(f.apiKeyEnv)); s.apiKey == "" {
			return s, usageErr("baton init: --api-key-env: $%s is empty or not set", f.apiKeyEnv)
		}
	} else {
		s.apiKey = m.usualKey(p)
	}
	if s.model == "" {
		s.model = p.model
	}
	if s.model == "" {
		list, err := listModels(ctx, probeClient(), s.baseURL, s.apiKey)
		switch {
		case err == nil && len(list.IDs) == 1:
			s.model = list.IDs[0]
			fmt.Fprintf(m.Stdout, "baton init: model %s, the one %s serves\n", s.model, shownURL(s.baseURL))
		case err == nil && len(list.IDs) > 1:
			return s, usageErr("baton init: --model is required with --provider %s (models at %s: %s)", p.name, shownURL(s.baseURL), cutList(list.IDs, 20))
		default:
			return s, usageErr("baton init: --model is required with --provider %s", p.name)
		}
	}
	s.slackBot, s.slackApp, s.slackSigning = Secret(m.Env("SLACK_BOT_TOKEN")), Secret(m.Env("SLACK_APP_TOKEN")), Secret(m.Env("SLACK_SIGNING_SECRET"))
	s.discordToken = Secret(m.Env("DISCORD_BOT_TOKEN"))
	return s, nil
}

// usualKey is the API key for p found where it usually is in the
// environment, or "".
func (m *Main) usualKey(p provider) Secret {
	for _, name := range p.keyEnvs {
		if v := m.Env(name); v != "" {
			return Secret(v)
		}
	}
	return ""
}

// initAsk asks, on the terminal, what the flags did not say.
func (m *Main) initAsk(ctx context.Context, f initFlags) (setup, error) {
	q := &prompter{r: bufio.NewReader(m.Stdin), w: m.Stdout}
	if tty, ok := m.Stdin.(*os.File); ok {
		q.tty = tty
	}
	dir, _ := filepath.Abs(filepath.Dir(f.config))
	fmt.Fprintf(m.Stdout, "baton init writes %s and .env in %s. Enter keeps the [default].\n\n", filepath.Base(f.config), dir)
	s := setup{slack: f.slack, discord: f.discord, baseURL: f.baseURL, model: f.model, dataDir: f.dataDir, appID: f.appID}
	var err error
	ask := func(flag string, dst *string, question string, options []string) {
		if err != nil || f.given[flag] {
			return
		}
		*dst, err = q.choose(question, options, *dst)
	}
	ask("slack", &s.slack, "Slack: socket (Socket Mode, no public URL), http (Events API) or off?", []string{"socket", "http", "off"})
	ask("discord", &s.discord, "Discord: on or off?", []string{"on", "off"})
	name := f.provider
	ask("provider", &name, "Model endpoint: "+strings.Join(providerNames(), ", ")+"?", providerNames())
	if err != nil {
		return s, err
	}
	s.provider, _ = lookupProvider(name)
	if !f.given["base-url"] {
		for {
			if s.baseURL, err = q.ask("Its API URL", s.provider.baseURL); err != nil {
				return s, err
			}
			if httpURL(s.baseURL) {
				break
			}
			fmt.Fprintln(m.Stdout, "  want an http:// or https:// URL, such as http://localhost:11434/v1")
		}
	}
	if f.apiKeyEnv != "" {
		if s.apiKey = Secret(m.Env(f.apiKeyEnv)); s.apiKey == "" {
			return s, usageErr("baton init: --api-key-env: $%s is empty or not set", f.apiKeyEnv)
		}
	} else if s.apiKey, err = q.secret("API key (hidden; Enter: none)", m.usualKey(s.provider)); err != nil {
		return s, err
	}
	if !f.given["model"] {
		def := s.provider.model
		if list, lerr := listModels(ctx, probeClient(), s.baseURL, s.apiKey); lerr == nil && len(list.IDs) > 0 {
			fmt.Fprintf(m.Stdout, "  models at %s: %s\n", shownURL(s.baseURL), cutList(list.IDs, 20))
			if !slices.Contains(list.IDs, def) {
				def = list.IDs[0]
			}
		}
		for s.model == "" {
			if s.model, err = q.ask("Model", def); err != nil {
				return s, err
			}
		}
	}
	if !f.given["data-dir"] {
		if s.dataDir, err = q.ask("Data directory", s.dataDir); err != nil {
			return s, err
		}
	}
	if s.slack != "off" {
		if s.slackBot, err = q.secret("Slack bot token, xoxb-… (hidden; Enter: later, in .env)", Secret(m.Env("SLACK_BOT_TOKEN"))); err != nil {
			return s, err
		}
		if s.slack == "socket" {
			s.slackApp, err = q.secret("Slack app-level token, xapp-… (hidden; Enter: later)", Secret(m.Env("SLACK_APP_TOKEN")))
		} else {
			s.slackSigning, err = q.secret("Slack signing secret (hidden; Enter: later)", Secret(m.Env("SLACK_SIGNING_SECRET")))
		}
		if err != nil {
			return s, err
		}
	}
	if s.discord == "on" {
		if s.discordToken, err = q.secret("Discord bot token (hidden; Enter: later)", Secret(m.Env("DISCORD_BOT_TOKEN"))); err != nil {
			return s, err
		}
		for !f.given["discord-app-id"] {
			if s.appID, err = q.ask("Discord Application ID, for the invite URL (Enter: skip)", s.appID); err != nil {
				return s, err
			}
			if s.appID == "" || digits.MatchString(s.appID) {
				break
			}
			fmt.Fprintln(m.Stdout, "  the Application ID is digits (Developer Portal → General Information)")
			s.appID = ""
		}
	}
	fmt.Fprintln(m.Stdout)
	return s, nil
}

// configFile is baton.yaml: the keys that differ between setups, quoted;
// every other key keeps its default.
func (s setup) configFile() []byte {
	var b strings.Builder
	b.WriteString("# Baton's configuration, written by baton init. configs/baton.yaml lists every\n" +
		"# key with its default (the README's Configuration section explains them).\n" +
		"# The secrets are not here but in .env, which Baton reads from the\n" +
		"# environment: load it first (set -a; . ./.env; set +a); docker compose reads it itself.\n")
	fmt.Fprintf(&b, "data_dir: %s\n", strconv.Quote(s.dataDir))
	fmt.Fprintf(&b, "llm:\n  base_url: %s\n  model: %s\n", strconv.Quote(s.baseURL), strconv.Quote(s.model))
	mode := s.slack
	if mode == "off" {
		mode = "socket"
	}
	fmt.Fprintf(&b, "slack:\n  enabled: %t\n  mode: %s\n", s.slack != "off", mode)
	fmt.Fprintf(&b, "discord:\n  enabled: %t\n", s.discord == "on")
	return []byte(b.String())
}

// envText is .env: its text and the variables it sets.
type envText struct {
	text []byte
	vars map[string]string
}

// envFile is .env: the secrets, each in the variable Baton reads it from.
// A value with a quote or a line break cannot be written so that both sh
// and docker compose read it back: it is refused.
func (s setup) envFile() (envText, error) {
	type entry struct {
		name string
		val  Secret
	}
	entries := []entry{{"OPENAI_API_KEY", s.apiKey}}
	switch s.slack {
	case "socket":
		entries = append(entries, entry{"SLACK_BOT_TOKEN", s.slackBot}, entry{"SLACK_APP_TOKEN", s.slackApp})
	case "http":
		entries = append(entries, entry{"SLACK_BOT_TOKEN", s.slackBot}, entry{"SLACK_SIGNING_SECRET", s.slackSigning})
	}
	if s.discord == "on" {
		entries = append(entries, entry{"DISCORD_BOT_TOKEN", s.discordToken})
	}
	var b strings.Builder
	b.WriteString("# Baton's secrets, written by baton init; keep this file private (mode 0600).\n" +
		"# Load it before starting Baton: set -a; . ./.env; set +a (docker compose reads it itself).\n")
	out := envText{vars: map[string]string{}}
	for _, e := range entries {
		v := e.val.Reveal()
		if strings.ContainsAny(v, "'\"\n\r\\") {
			return out, usageErr("baton init: the value for %s has a quote, a backslash or a line break, which .env cannot carry for both sh and docker compose", e.name)
		}
		if v != "" && !safeEnvValue.MatchString(v) {
			fmt.Fprintf(&b, "%s='%s'\n", e.name, v)
		} else {
			fmt.Fprintf(&b, "%s=%s\n", e.name, v)
		}
		out.vars[e.name] = v
	}
	out.text = []byte(b.String())
	return out, nil
}

var safeEnvValue = regexp.MustCompile(`^[A-Za-z0-9_./:@+=,-]*$`)

// writeFile writes data to path with mode: a new file, or, with force, over
// the one there (its mode set to mode too).
func writeFile(path string, data []byte, mode os.FileMode, force bool) error {
	flags := os.O_WRONLY | os.O_CREATE | os.O_EXCL
	if force {
		flags = os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	}
	f, err := os.OpenFile(path, flags, mode)
	if errors.Is(err, os.ErrExist) {
		return usageErr("baton init: %s exists: pass --force to overwrite it", path)
	}
	if err != nil {
		return fmt.Errorf("baton init: %w", err)
	}
	_, err = f.Write(data)
	err = errors.Join(err, f.Chmod(mode), f.Close())
	if err != nil {
		return fmt.Errorf("baton init: write %s: %w", path, err)
	}
	return nil
}

// initNext prints what was written and what to do next: the Slack manifest
// to paste, the Discord invite URL, how to start.
func (m *Main) initNext(s setup, cfgPath, envPath string) {
	w := m.Stdout
	fmt.Fprintf(w, "baton init: wrote %s and %s (mode 0600: it holds the secrets)\n", cfgPath, envPath)
	if s.slack != "off" {
		manifest := string(configs.SlackManifest)
		if s.slack == "http" {
			manifest = strings.Replace(manifest, "socket_mode_enabled: true", "socket_mode_enabled: false", 1)
		}
		fmt.Fprintf(w, "\nSlack: at https://api.slack.com/apps choose Create New App → From a manifest, pick the workspace and paste:\n\n%s\n", manifest)
		if s.slack == "http" {
			fmt.Fprintln(w, "For slack.mode http, uncomment the three URLs in it and point them at the HTTPS address in front of Baton's http.addr.")
		}
		fmt.Fprintf(w, "Then install the app and put its tokens in %s.\n", envPath)
	}
	if s.discord == "on" {
		if s.appID != "" {
			fmt.Fprintf(w, "\nDiscord: invite the bot with %s\n", discordInvite(s.appID))
		} else {
			fmt.Fprintln(w, "\nDiscord: the invite URL needs the Application ID (Developer Portal → General Information): pass --discord-app-id, or run baton doctor once DISCORD_BOT_TOKEN is set, which prints it.")
		}
		fmt.Fprintln(w, "Switch on the Message Content intent (Bot → Privileged Gateway Intents).")
	}
	fmt.Fprintf(w, "\nNext: set -a; . %s; set +a, then baton serve --config %s (or baton chat --config %s to try it in the terminal).\n",
		shellPath(envPath), cfgPath, cfgPath)
}

// shellPath is p as sh's . command finds it: with a directory.
func shellPath(p string) string {
	if strings.ContainsRune(p, '/') {
		return p
	}
	return "./" + p
}

// prompter asks questions on a terminal, one line each.
type prompter struct {
	r   *bufio.Reader
	w   io.Writer
	tty *os.File // the terminal, to read secrets without echo; nil: shown
}

// errNoAnswer is an input that ended before an answer.
var errNoAnswer = &exitError{code: exitUsage, err: errors.New("baton init: the input ended before every question was answered")}

// ask asks question; an empty answer is def.
func (p *prompter) ask(question, def string) (string, error) {
	if def != "" {
		fmt.Fprintf(p.w, "%s [%s]: ", question, def)
	} else {
		fmt.Fprintf(p.w, "%s: ", question)
	}
	line, err := p.r.ReadString('\n')
	if err != nil && (line == "" || !errors.Is(err, io.EOF)) {
		return "", errNoAnswer
	}
	if v := strings.TrimSpace(line); v != "" {
		return v, nil
	}
	return def, nil
}

// choose asks until the answer is one of options.
func (p *prompter) choose(question string, options []string, def string) (string, error) {
	for {
		v, err := p.ask(question, def)
		if err != nil {
			return "", err
		}
		if slices.Contains(options, v) {
			return v, nil
		}
		fmt.Fprintf(p.w, "  want one of %s\n", strings.Join(options, ", "))
	}
}

// secret asks for a secret without echoing it where the terminal allows;
// an empty answer keeps def (never shown).
func (p *prompter) secret(question string, def Secret) (Secret, error) {
	if def != "" {
		question += " [the one in the environment]"
	}
	// Off before the prompt shows: what is typed after it is not echoed.
	restore := func() {}
	if p.tty != nil {
		restore = noEcho(p.tty)
	}
	fmt.Fprintf(p.w, "%s: ", question)
	line, err := p.r.ReadString('\n')
	restore()
	fmt.Fprintln(p.w)
	if err != nil && (line == "" || !errors.Is(err, io.EOF)) {
		return "", errNoAnswer
	}
	if v := strings.TrimSpace(line); v != "" {
		return Secret(v), nil
	}
	return def, nil
}
