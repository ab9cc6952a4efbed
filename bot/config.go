package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"gopkg.in/yaml.v3"

	"github.com/baton-bot/baton/core/llm"
	"github.com/baton-bot/baton/core/policy"
)

// Config is Baton's whole configuration. The yaml names are a public
// contract (SPEC §11); configs/baton.yaml documents every key, and a test
// fails when a key here is missing from it.
type Config struct {
	DataDir      string `yaml:"data_dir"`
	PiecesDir    string `yaml:"pieces_dir"`
	DefaultPiece string `yaml:"default_piece"`
	Locale       string `yaml:"locale"`
	Timezone     string `yaml:"timezone"`

	LLM        LLMConfig        `yaml:"llm"`
	Context    ContextConfig    `yaml:"context"`
	Agent      AgentConfig      `yaml:"agent"`
	Database   DatabaseConfig   `yaml:"database"`
	Redis      RedisConfig      `yaml:"redis"`
	Queue      QueueConfig      `yaml:"queue"`
	Workers    WorkersConfig    `yaml:"workers"`
	Tools      ToolsConfig      `yaml:"tools"`
	Egress     EgressConfig     `yaml:"egress"`
	Files      FilesConfig      `yaml:"files"`
	Workspaces WorkspacesConfig `yaml:"workspaces"`
	Retention  RetentionConfig  `yaml:"retention"`
	HTTP       HTTPConfig       `yaml:"http"`
	Admin      AdminConfig      `yaml:"admin"`
	API        APIConfig        `yaml:"api"`
	UI         UIConfig         `yaml:"ui"`
	Log        LogConfig        `yaml:"log"`
	Otel       OtelConfig       `yaml:"otel"`
	Slack      SlackConfig      `yaml:"slack"`
	Discord    DiscordConfig    `yaml:"discord"`
	Access     AccessConfig     `yaml:"access"`
	Approvals  ApprovalsConfig  `yaml:"approvals"`
	MCP        MCPConfig        `yaml:"mcp"`

	// Budgets are checked before each model request, and the loop
	// guards watch for an agent going round in circles (bot/budgets.go).
	Budgets BudgetsConfig `yaml:"budgets"`
	Guards  GuardsConfig  `yaml:"guards"`

	Progress ProgressConfig `yaml:"progress"`
}

// ProgressConfig is how each chat platform shows a running job's
// progress: one live message (Slack's streaming message, Discord's edited
// progress message) rather than the status message edited now and then.
type ProgressConfig struct {
	Slack   PlatformProgress `yaml:"slack"`
	Discord PlatformProgress `yaml:"discord"`
}

// PlatformProgress is one platform's live progress: on or off, and the
// least time between two updates of a job's progress there.
type PlatformProgress struct {
	Stream   bool          `yaml:"stream"`
	Interval time.Duration `yaml:"interval"`
}

// modelAlias is what an llm.models alias and its model may look like (as
// a re-run's model name, core/chat).
var modelAlias = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:/@-]{0,127}$`)

// LLMConfig is the OpenAI-compatible endpoint and its limits.
type LLMConfig struct {
	BaseURL         string        `yaml:"base_url"`
	APIKey          Secret        `yaml:"api_key"`
	Model           string        `yaml:"model"`
	ContextWindow   int           `yaml:"context_window"`
	MaxOutputTokens int           `yaml:"max_output_tokens"`
	RequestTimeout  time.Duration `yaml:"request_timeout"`
	MaxRetries      int           `yaml:"max_retries"`
	MaxTokensPerJob int64         `yaml:"max_tokens_per_job"` // 0: unlimited

	// Streaming, provider profiles and reasoning models (core/llm).
	Stream          bool   `yaml:"stream"`           // stream answers (server-sent events)
	Provider        string `yaml:"provider"`         // auto | a name of llm.ProviderNames
	ReasoningEffort string `yaml:"reasoning_effort"` // "" | minimal | low | medium | high

	// Prices are each model's price, for the cost of its usage
	// (bot/budgets.go).
	Prices map[string]PriceConfig `yaml:"prices"`
	// Models are the aliases a re-run may name for its model (`!rerun
	// --model`, the dashboard): alias → model. Set, a re-run may use only
	// these; empty, any model name.
	Models map[string]string `yaml:"models"`
}

// ContextConfig holds the context manager's thresholds, as fractions of the
// context window, and the tool-output budget.
type ContextConfig struct {
	Warn                float64 `yaml:"warn"`
	Prompt              float64 `yaml:"prompt"`
	ForceTransition     float64 `yaml:"force_transition"`
	Exhausted           float64 `yaml:"exhausted"`
	ToolResultMaxTokens int     `yaml:"tool_result_max_tokens"`
	Compaction          string  `yaml:"compaction"` // on | off
	Mask                float64 `yaml:"mask"`       // masking of old tool results from here (compaction on)
	Compact             float64 `yaml:"compact"`    // summary and continue from here (compaction on)
}

// AgentConfig tunes the agent loop.
type AgentConfig struct {
	ReminderAfter int `yaml:"reminder_after"` // text-only replies before a reminder
}

// DatabaseConfig selects the system of record: SQLite under data_dir when
// URL is empty, SQLite at PATH for sqlite:PATH, PostgreSQL for a
// postgres:// or postgresql:// URL.
type DatabaseConfig struct {
	URL string `yaml:"url"`
	// MaxConns bounds PostgreSQL's pool (0: the larger of 4 and the CPUs).
	MaxConns int `yaml:"max_conns"`
	// StatementTimeout is PostgreSQL's statement_timeout (0: the server's).
	StatementTimeout time.Duration `yaml:"statement_timeout"`
	// ConnectRetries is how many more times Baton tries to reach
	// PostgreSQL at start after a first failure.
	ConnectRetries int `yaml:"connect_retries"`
}

// RedisConfig selects the queue: Redis when URL or ClusterAddrs is set,
// else in-process.
type RedisConfig struct {
	// URL is one Redis (redis://, rediss://, unix://) or a master that
	// Sentinel watches (redis+sentinel://, see parseSentinel).
	URL string `yaml:"url"`
	// ClusterAddrs are host:port addresses of Redis Cluster nodes (a few
	// suffice: the client learns the rest); file only, like every list.
	ClusterAddrs []string `yaml:"cluster_addrs"`
	// ClusterUsername and ClusterPassword are the cluster nodes' ACL user
	// and password (a URL carries its own); ClusterTLS connects to them
	// with TLS.
	ClusterUsername string `yaml:"cluster_username"`
	ClusterPassword Secret `yaml:"cluster_password"`
	ClusterTLS      bool   `yaml:"cluster_tls"`
}

// QueueConfig holds the queue's lease timings and retry limit.
type QueueConfig struct {
	Lease       time.Duration `yaml:"lease"`
	Heartbeat   time.Duration `yaml:"heartbeat"`
	MaxFailures int           `yaml:"max_failures"`
}

// WorkersConfig sizes the worker pool.
type WorkersConfig struct {
	Concurrency   int           `yaml:"concurrency"`
	ShutdownGrace time.Duration `yaml:"shutdown_grace"`
}

// ToolsConfig configures the agent's tools.
type ToolsConfig struct {
	Bash    BashConfig    `yaml:"bash"`
	Sandbox SandboxConfig `yaml:"sandbox"`
}

// BashConfig configures the Bash tool.
type BashConfig struct {
	Sandbox string        `yaml:"sandbox"` // auto | bwrap | none: the sandbox of Bash and git
	Timeout time.Duration `yaml:"timeout"`
	Network string        `yaml:"network"` // deny | allow_pieces
}

// SandboxConfig sets the sandbox's user and per-command resource limits.
type SandboxConfig struct {
	UID            int   `yaml:"uid"`
	GID            int   `yaml:"gid"`
	MaxProcesses   int   `yaml:"max_processes"`
	MaxMemoryBytes int64 `yaml:"max_memory_bytes"`
	MaxOpenFiles   int   `yaml:"max_open_files"`
	MaxFileBytes   int64 `yaml:"max_file_bytes"`
}

// FilesConfig limits attachments.
type FilesConfig struct {
	MaxBytes int64 `yaml:"max_bytes"`
}

// RetentionConfig is how long the store keeps finished work
// (core.Retention); 0 keeps a kind forever. Nothing of a task with a job
// queued, running or waiting is removed.
type RetentionConfig struct {
	FinishedJobs time.Duration `yaml:"finished_jobs"`
	Events       time.Duration `yaml:"events"`
	Comments     time.Duration `yaml:"comments"`
}

// WorkspacesConfig governs task workspaces.
type WorkspacesConfig struct {
	// Root holds the tasks' workspaces; "" is data_dir/workspaces. Gateways
	// and workers on several hosts share it (a shared volume): it is the
	// only local state they share.
	Root      string        `yaml:"root"`
	Retention time.Duration `yaml:"retention"`
	// MaxBytes caps each workspace (workspace.Quota); 0: no cap.
	MaxBytes int64 `yaml:"max_bytes"`
	// MinFreeBytes is data_dir's free-space floor below which tools may
	// not write (workspace.Floor); 0: none.
	MinFreeBytes int64 `yaml:"min_free_bytes"`
}

// HTTPConfig is the main HTTP listener.
type HTTPConfig struct {
	Addr           string `yaml:"addr"`
	MaxConnections int    `yaml:"max_connections"`
}

// AdminConfig is the optional separate listener for metrics and health.
type AdminConfig struct {
	Addr string `yaml:"addr"`
	// Pprof serves Go's runtime profiles (heap, CPU, goroutines) at
	// /debug/pprof/ on Addr, which it needs: never on http.addr.
	Pprof bool `yaml:"pprof"`
}

// APIConfig configures the task API.
type APIConfig struct {
	Token Secret `yaml:"token"` // empty: API off
}

// OtelConfig configures OpenTelemetry tracing. Where spans go is the
// standard OTEL_EXPORTER_OTLP_* variables' business (see core/tracing).
type OtelConfig struct {
	Enabled bool `yaml:"enabled"` // false: no tracer, no exporter, no trace ids in logs
}

// UIConfig configures the operator dashboard at /ui/ on admin.addr (or
// http.addr without it).
type UIConfig struct {
	Token Secret       `yaml:"token"` // empty: UI off
	OIDC  UIOIDCConfig `yaml:"oidc"`
}

// UIOIDCConfig adds a login through an OpenID Connect provider to the
// dashboard (issuer empty: none).
type UIOIDCConfig struct {
	Issuer       string   `yaml:"issuer"`
	ClientID     string   `yaml:"client_id"`
	ClientSecret Secret   `yaml:"client_secret"`
	RedirectURL  string   `yaml:"redirect_url"`
	Allowed      []string `yaml:"allowed"` // addresses and @domains; empty: nobody
}

// LogConfig configures logging.
type LogConfig struct {
	Format string `yaml:"format"` // text | json
	Level  string `yaml:"level"`  // debug | info | warn | error
}

// SlackConfig configures the Slack adapter.
type SlackConfig struct {
	Enabled        bool   `yaml:"enabled"`
	Mode           string `yaml:"mode"` // socket | http
	APIURL         string `yaml:"api_url"`
	RequireMention bool   `yaml:"require_mention"`
	IgnoreBots     bool   `yaml:"ignore_bots"`
	Command        string `yaml:"command"` // the slash command Baton answers
	BotToken       Secret `yaml:"bot_token"`
	AppToken       Secret `yaml:"app_token"`
	SigningSecret  Secret `yaml:"signing_secret"`
}

// DiscordConfig configures the Discord adapter.
type DiscordConfig struct {
	Enabled        bool   `yaml:"enabled"`
	APIURL         string `yaml:"api_url"`
	GuildID        string `yaml:"guild_id"`
	RequireMention bool   `yaml:"require_mention"`
	IgnoreBots     bool   `yaml:"ignore_bots"`
	BotToken       Secret `yaml:"bot_token"`
}

// AccessConfig says who may use, abort and answer. Ids carry their platform
// (slack:U123, slack-group:S123, discord:1234, discord-role:5678).
type AccessConfig struct {
	Admins          []string `yaml:"admins"`
	AllowedUsers    []string `yaml:"allowed_users"`
	AllowedChannels []string `yaml:"allowed_channels"`
	AbortBy         string   `yaml:"abort_by"`  // owner_and_admins | anyone
	AnswerBy        string   `yaml:"answer_by"` // participants | owner
}

// ApprovalsConfig is the approvals policy (core/policy): which of the
// agent's tool calls run, wait for a person's decision in the thread, or are
// refused, and who besides the requester and access.admins may decide.
// Approvers and rules are read from the file only, as the access lists are.
type ApprovalsConfig struct {
	// Timeout is how long an approval waits; undecided, it is denied.
	Timeout time.Duration `yaml:"timeout"`
	// Approvers are platform-qualified users or groups, as in
	// access.allowed_users.
	Approvers []string `yaml:"approvers"`
	// Rules are tried in order and the first that matches decides; with
	// none matching, Baton's own tools run.
	Rules []ApprovalRule `yaml:"rules"`
}

// ApprovalRule is one configured rule as written; policyRules turns it into
// a policy.Rule.
type ApprovalRule struct {
	Tool     string   `yaml:"tool"`     // a tool name or a glob of names (path.Match syntax)
	Match    string   `yaml:"match"`    // Go regular expression found in the call's subject (anchor it with ^ $); empty: any
	Channels []string `yaml:"channels"` // platform-qualified channels; empty: every channel
	Action   string   `yaml:"action"`   // allow | ask | deny
}

// policyRules returns the rules as the policy takes them (regular
// expressions compiled, each named approvals.rules[i]), or every problem
// with them, each a *ConfigError naming the key to change
// (approvals.rules[1].match).
func (a ApprovalsConfig) policyRules() ([]policy.Rule, []*ConfigError) {
	var rules []policy.Rule
	var errs []*ConfigError
	fail := func(key, msg string) { errs = append(errs, &ConfigError{Key: key, Msg: msg}) }
	for i, r := range a.Rules {
		key := fmt.Sprintf("approvals.rules[%d]", i)
		before := len(errs)
		rule := policy.Rule{Tool: r.Tool, Channels: slices.Clone(r.Channels), Action: policy.Action(r.Action), Name: key}
		if r.Tool == "" {
			fail(key+".tool", "is required: a tool name such as Bash or a glob such as mcp__github__*")
		} else if _, err := path.Match(r.Tool, ""); err != nil {
			fail(key+".tool", fmt.Sprintf("%q is not a glob (path.Match syntax): %v", r.Tool, err))
		}
		if r.Match != "" {
			re, err := regexp.Compile(r.Match)
			if err != nil {
				fail(key+".match", err.Error())
			}
			rule.Match = re
		}
		for j, ch := range r.Channels {
			if msg := idProblem(ch, channelKinds); msg != "" {
				fail(fmt.Sprintf("%s.channels[%d]", key, j), msg)
			}
		}
		if r.Action == "" {
			fail(key+".action", "is required: allow | ask | deny")
		} else if _, ok := policy.ParseAction(r.Action); !ok {
			fail(key+".action", fmt.Sprintf("must be one of allow | ask | deny, got %q", r.Action))
		}
		// The policy has the last word on what a rule may be.
		if len(errs) == before {
			if err := rule.Validate(); err != nil {
				fail(key, err.Error())
			}
		}
		rules = append(rules, rule)
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return rules, nil
}

// problems returns what is wrong with the approvers and the rules, each a
// *ConfigError naming its key. They are read from the file only, so
// decodeConfig reports them with their lines; Validate reports them too,
// for a configuration built otherwise.
func (a ApprovalsConfig) problems() []*ConfigError {
	var errs []*ConfigError
	for j, id := range a.Approvers {
		if msg := idProblem(id, userKinds); msg != "" {
			errs = append(errs, &ConfigError{Key: fmt.Sprintf("approvals.approvers[%d]", j), Msg: msg})
		}
	}
	_, ruleErrs := a.policyRules()
	return append(errs, ruleErrs...)
}

// DefaultConfig returns the configuration used when no file sets a key. It
// is the single place defaults live; configs/baton.yaml must equal it.
func DefaultConfig() Config {
	return Config{
		DataDir:      "./data",
		PiecesDir:    "configs/pieces",
		DefaultPiece: "chat",
		Locale:       "en",
		Timezone:     "Local",
		LLM: LLMConfig{
			BaseURL:         "https://api.openai.com/v1",
			Model:           "gpt-4.1-mini",
			ContextWindow:   128000,
			MaxOutputTokens: 4096,
			RequestTimeout:  120 * time.Second,
			MaxRetries:      5,
			Stream:          true,
			Provider:        "auto",

			Prices: map[string]PriceConfig{},
			Models: map[string]string{},
		},
		Context: ContextConfig{
			Warn:                0.70,
			Prompt:              0.85,
			ForceTransition:     0.95,
			Exhausted:           0.99,
			ToolResultMaxTokens: 60000,
			Compaction:          "on",
			Mask:                0.60,
			Compact:             0.80,
		},
		Agent:    AgentConfig{ReminderAfter: 1},
		Database: DatabaseConfig{ConnectRetries: 5},
		Queue:    QueueConfig{Lease: 30 * time.Second, Heartbeat: 10 * time.Second, MaxFailures: 5},
		Workers:  WorkersConfig{Concurrency: 4, ShutdownGrace: 20 * time.Second},
		Tools: ToolsConfig{
			Bash: BashConfig{Sandbox: "auto", Timeout: 120 * time.Second, Network: "deny"},
			Sandbox: SandboxConfig{
				UID: 65534, GID: 65534,
				MaxProcesses: 256, MaxMemoryBytes: 2 << 30, MaxOpenFiles: 1024, MaxFileBytes: 1 << 30,
			},
		},
		Egress: EgressConfig{
			Default: "deny", Allow: []EgressEntry{}, Deny: []EgressEntry{}, Credentials: []EgressCredential{},
			MaxConnections: 1000, MaxOpenConnections: 64, MaxBytes: 1 << 30,
			DialTimeout: 10 * time.Second, IdleTimeout: 5 * time.Minute,
		},
		Files:      FilesConfig{MaxBytes: 20000000},
		Workspaces: WorkspacesConfig{Retention: 720 * time.Hour, MaxBytes: 2000000000, MinFreeBytes: 1000000000},
		Retention:  RetentionConfig{FinishedJobs: 365 * 24 * time.Hour, Events: 90 * 24 * time.Hour, Comments: 365 * 24 * time.Hour},
		HTTP:       HTTPConfig{Addr: "127.0.0.1:8080", MaxConnections: 512},
		Log:        LogConfig{Format: "text", Level: "info"},
		Slack: SlackConfig{
			Mode:       "socket",
			APIURL:     "https://slack.com/api/",
			IgnoreBots: true,
			Command:    "/baton",
		},
		Discord: DiscordConfig{
			APIURL:     "https://discord.com/api/v9/",
			IgnoreBots: true,
		},
		Access: AccessConfig{
			Admins:          []string{},
			AllowedUsers:    []string{},
			AllowedChannels: []string{},
			AbortBy:         "owner_and_admins",
			AnswerBy:        "participants",
		},
		Redis: RedisConfig{ClusterAddrs: []string{}},
		UI:    UIConfig{OIDC: UIOIDCConfig{Allowed: []string{}}},
		Approvals: ApprovalsConfig{
			Timeout:   time.Hour,
			Approvers: []string{},
			Rules:     []ApprovalRule{},
		},
		MCP: MCPConfig{MaxTools: 40, Servers: map[string]MCPServer{}},

		Progress: ProgressConfig{
			Slack:   PlatformProgress{Stream: true, Interval: time.Second},
			Discord: PlatformProgress{Stream: true, Interval: 2 * time.Second},
		},

		Budgets: BudgetsConfig{Channels: map[string]BudgetScopes{}},
		Guards:  GuardsConfig{RepeatCalls: 4, MovementCycles: 3, MaxDuration: 2 * time.Hour},
	}
}

// ConfigError is a configuration problem: a file that cannot be read or
// parsed, an unknown key, or a value Validate refuses. Baton refuses to
// start on it (exit 2). Its message names the file and line or the key.
type ConfigError struct {
	File string // "" when the problem is not tied to a file
	Line int    // 0 when unknown
	Key  string // dotted key, e.g. "llm.model"; "" when unknown
	Msg  string
}

func (e *ConfigError) Error() string {
	var b strings.Builder
	switch {
	case e.File != "" && e.Line > 0:
		fmt.Fprintf(&b, "%s:%d: ", e.File, e.Line)
	case e.File != "":
		fmt.Fprintf(&b, "%s: ", e.File)
	}
	if e.Key != "" {
		fmt.Fprintf(&b, "%s: ", e.Key)
	}
	b.WriteString(e.Msg)
	return b.String()
}

// LoadConfig builds the configuration: DefaultConfig, then the file at path
// (or, when path is empty, at env("BATON_CONFIG"); with neither, no file),
// then the environment (every scalar key from its variable, envVars), then
// relative paths made absolute: those the file wrote against the file's
// directory, the others against the working directory. It does not call
// Validate.
//
// Decoding is strict: an unknown key, a value of the wrong type and bad YAML
// are errors naming the file and line (and the key when known); a variable
// that does not parse names the variable. Every problem with the file, its
// content or the environment is reported as a *ConfigError (several are
// joined with errors.Join).
func LoadConfig(path string, env func(string) string) (Config, error) {
	cfg, _, err := loadConfig(path, env)
	return cfg, err
}

// loadConfig is LoadConfig, and says where each value came from.
func loadConfig(path string, env func(string) string) (Config, Origins, error) {
	cfg, origins := DefaultConfig(), Origins{}
	path, named, err := configPath(path, env)
	if err != nil {
		return Config{}, nil, err
	}
	wd, err := os.Getwd()
	if err != nil {
		return Config{}, nil, fmt.Errorf("load config: working directory: %w", err)
	}
	fileDir := wd
	if path != "" {
		data, err := os.ReadFile(path)
		if err != nil {
			var pe *fs.PathError
			if errors.As(err, &pe) {
				err = pe.Err // the path is already in the message
			}
			return Config{}, nil, &ConfigError{File: path, Msg: fmt.Sprintf("cannot read config (named by %s): %v", named, err)}
		}
		if err := decodeConfig(data, path, &cfg, origins); err != nil {
			return Config{}, nil, err
		}
		abs, err := filepath.Abs(path)
		if err != nil {
			return Config{}, nil, fmt.Errorf("load config: %w", err)
		}
		fileDir = filepath.Dir(abs)
	}
	if err := applyEnv(&cfg, env, origins); err != nil {
		return Config{}, nil, err
	}
	if errs := cfg.MCP.expand(env); len(errs) > 0 {
		for _, e := range errs {
			e.File = path
		}
		return Config{}, nil, joinConfigErrors(errs)
	}
	if errs := cfg.Egress.expandCredentials(env); len(errs) > 0 {
		return Config{}, nil, joinConfigErrors(errs)
	}
	cfg.resolvePaths(wd, fileDir, origins)
	return cfg, origins, nil
}

// configPath returns the config file to read: flag (--config) when set,
// else BATON_CONFIG; "" for none. named says which gave it.
func configPath(flag string, env func(string) string) (path, named string, err error) {
	if flag != "" {
		return flag, "--config", nil
	}
	p, _, err := envValue(env, "BATON_CONFIG")
	if err != nil {
		return "", "", &ConfigError{Msg: err.Error()}
	}
	return p, "BATON_CONFIG", nil
}

// decodeConfig decodes data (named file in messages) over cfg, strictly,
// and records in origins (when not nil) the line of every key it sets.
func decodeConfig(data []byte, file string, cfg *Config, origins Origins) error {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return yamlError(file, err, nil)
	}
	if len(root.Content) == 0 {
		return nil // empty file: defaults
	}
	doc := root.Content[0]
	if doc.Kind != yaml.MappingNode {
		if doc.Kind == yaml.ScalarNode && doc.Tag == "!!null" {
			return nil
		}
		return &ConfigError{File: file, Line: doc.Line, Msg: "the config must be a mapping of keys"}
	}
	lines := keyLines{byLine: map[int]string{}, byKey: map[string]int{}}
	if err := checkKeys(doc, reflect.TypeOf(Config{}), "", file, lines); err != nil {
		return err
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(cfg); err != nil && !errors.Is(err, io.EOF) {
		return yamlError(file, err, lines.byLine)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return &ConfigError{File: file, Line: extra.Line, Msg: "only one YAML document is allowed"}
	}
	if origins != nil {
		eachKey(reflect.ValueOf(cfg).Elem(), "", func(key string, _ reflect.Value) {
			if line, ok := lines.byKey[key]; ok {
				origins[key] = Origin{File: file, Line: line}
			}
		})
	}
	// What only the file sets is checked here, where its lines are known.
	errs := append(cfg.Approvals.problems(), cfg.MCP.problems()...)
	errs = append(errs, cfg.Egress.problems()...)
	for _, e := range errs {
		e.File, e.Line = file, lines.of(e.Key)
	}
	return joinConfigErrors(errs)
}

// joinConfigErrors joins errs as errors.Join does; nil when there are none.
func joinConfigErrors(errs []*ConfigError) error {
	all := make([]error, len(errs))
	for i, e := range errs {
		all[i] = e
	}
	return errors.Join(all...)
}

// keyLines records where a file writes each key.
type keyLines struct {
	byLine map[int]string // line → dotted key, to name keys in decoder errors
	byKey  map[string]int // dotted key, list items as key[i] → line
}

// of returns the line of key, or of the nearest enclosing key the file
// writes (a rule's line for its missing tool); 0 when none.
func (l keyLines) of(key string) int {
	for key != "" {
		if line, ok := l.byKey[key]; ok {
			return line
		}
		key = key[:max(strings.LastIndexAny(key, ".["), 0)]
	}
	return 0
}

// checkKeys walks a mapping against the struct type t and reports the first
// key that t has no field for, naming it in full. It records every key's
// line in lines, and descends into lists (approvals.rules[1].match).
func checkKeys(n *yaml.Node, t reflect.Type, prefix, file string, lines keyLines) error {
	if n.Kind != yaml.MappingNode {
		return nil // a scalar where a section belongs: the decoder reports it
	}
	fields := yamlFields(t)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		name := prefix + k.Value
		f, ok := fields[k.Value]
		if !ok {
			msg := "unknown key"
			if prefix != "" {
				msg = fmt.Sprintf("unknown key (%s has: %s)", strings.TrimSuffix(prefix, "."), strings.Join(slices.Sorted(maps.Keys(fields)), ", "))
			}
			return &ConfigError{File: file, Line: k.Line, Key: name, Msg: msg}
		}
		lines.byLine[k.Line] = name
		lines.byKey[name] = k.Line
		switch {
		case f.Type.Kind() == reflect.Struct:
			if err := checkKeys(v, f.Type, name+".", file, lines); err != nil {
				return err
			}
		case f.Type.Kind() == reflect.Map && f.Type.Elem().Kind() == reflect.Struct && v.Kind == yaml.MappingNode:
			// A map of sections (mcp.servers.<name>): each value is
			// checked as its struct, named by its key.
			for j := 0; j+1 < len(v.Content); j += 2 {
				at := name + "." + v.Content[j].Value
				lines.byKey[at] = v.Content[j].Line
				if err := checkKeys(v.Content[j+1], f.Type.Elem(), at+".", file, lines); err != nil {
					return err
				}
			}
		case f.Type.Kind() == reflect.Slice && v.Kind == yaml.SequenceNode:
			for j, item := range v.Content {
				at := fmt.Sprintf("%s[%d]", name, j)
				lines.byKey[at] = item.Line
				if f.Type.Elem().Kind() == reflect.Struct {
					if err := checkKeys(item, f.Type.Elem(), at+".", file, lines); err != nil {
						return err
					}
				}
			}
		}
	}
	return nil
}

// yamlFields maps a struct type's yaml names to its fields.
func yamlFields(t reflect.Type) map[string]reflect.StructField {
	m := make(map[string]reflect.StructField, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		if name := yamlName(f); name != "" {
			m[name] = f
		}
	}
	return m
}

// yamlName returns the yaml key of f, or "" when f is not decoded.
func yamlName(f reflect.StructField) string {
	if !f.IsExported() {
		return ""
	}
	name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	if name == "-" {
		return ""
	}
	if name == "" {
		name = strings.ToLower(f.Name)
	}
	return name
}

var yamlLine = regexp.MustCompile(`^(?:yaml: )?line (\d+): (.*)$`)

// yamlError turns a yaml.v3 error into a *ConfigError with the file, the
// line and, when keys knows the line, the key.
func yamlError(file string, err error, keys map[int]string) error {
	var te *yaml.TypeError
	if errors.As(err, &te) && len(te.Errors) > 0 {
		var errs []error
		for _, e := range te.Errors {
			errs = append(errs, lineError(file, strings.TrimSpace(e), keys))
		}
		return errors.Join(errs...)
	}
	return lineError(file, err.Error(), keys)
}

var yamlCannot = regexp.MustCompile("^cannot unmarshal !!\\w+ `(.*)` into ")

func lineError(file, msg string, keys map[int]string) *ConfigError {
	m := yamlLine.FindStringSubmatch(msg)
	if m == nil {
		return &ConfigError{File: file, Msg: strings.TrimPrefix(msg, "yaml: ")}
	}
	line, _ := strconv.Atoi(m[1])
	key, text := keys[line], m[2]
	// Say what the key wants in the config's terms, not in Go's.
	if c := yamlCannot.FindStringSubmatch(text); c != nil && key != "" {
		if want := wantOf(key); want != "" {
			text = fmt.Sprintf("want %s, got %q", want, c[1])
		}
	}
	return &ConfigError{File: file, Line: line, Key: key, Msg: text}
}

// wantOf describes the value the dotted key takes, or "" when unknown.
func wantOf(key string) string {
	t := reflect.TypeOf(Config{})
	for part := range strings.SplitSeq(key, ".") {
		if t.Kind() == reflect.Map {
			t = t.Elem() // part names an entry (mcp.servers.<name>)
			continue
		}
		if t.Kind() != reflect.Struct {
			return ""
		}
		name, item := strings.CutSuffix(part, "]")
		name, _, _ = strings.Cut(name, "[")
		f, ok := yamlFields(t)[name]
		if !ok {
			return ""
		}
		t = f.Type
		if item {
			if t.Kind() != reflect.Slice {
				return ""
			}
			t = t.Elem()
		}
	}
	switch {
	case t == durationType:
		return "a duration such as 30s"
	case t.Kind() == reflect.Struct:
		return "a mapping of keys"
	case t.Kind() == reflect.Slice:
		return "a list"
	case t.Kind() == reflect.Bool:
		return "true or false"
	case t.Kind() == reflect.Float64:
		return "a number"
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Int64:
		return "a whole number"
	case t.Kind() == reflect.String:
		return "a string"
	}
	return ""
}

// Origin says where a key's value came from: the built-in default, a line
// of the config file, or an environment variable.
type Origin struct {
	File string // the config file, when it wrote the key
	Line int    // its line in File
	Env  string // the variable, when the environment set the key
	// CR is set when the variable's value ended in a carriage return
	// (a .env file with Windows line endings), which Baton removed.
	CR bool
}

// String renders the origin as `baton config` prints it: "default",
// "FILE:LINE" or "environment VAR".
func (o Origin) String() string {
	switch {
	case o.Env != "" && o.CR:
		return "environment " + o.Env + ` (its trailing \r removed)`
	case o.Env != "":
		return "environment " + o.Env
	case o.File != "":
		return fmt.Sprintf("%s:%d", o.File, o.Line)
	}
	return "default"
}

// Origins maps each dotted key (slack.bot_token, access.admins) that was
// not left at its default to where its value came from.
type Origins map[string]Origin

// Of returns where key's value came from; the zero Origin (default) when
// nothing set it.
func (o Origins) Of(key string) Origin { return o[key] }

// envPrefix starts the variable of every scalar key (envVar).
const envPrefix = "BATON_"

// envAliases are the conventional variables Baton also reads, each for one
// key. The key's own BATON_ variable wins over its alias when both are set.
var envAliases = map[string]string{
	"llm.api_key":          "OPENAI_API_KEY",
	"llm.base_url":         "OPENAI_BASE_URL",
	"redis.url":            "REDIS_URL",
	"database.url":         "DATABASE_URL",
	"slack.bot_token":      "SLACK_BOT_TOKEN",
	"slack.app_token":      "SLACK_APP_TOKEN",
	"slack.signing_secret": "SLACK_SIGNING_SECRET",
	"discord.bot_token":    "DISCORD_BOT_TOKEN",
}

// envVar returns the environment variable that sets the dotted key:
// BATON_ and the key in upper case with its sections joined by _
// (slack.enabled → BATON_SLACK_ENABLED, tools.bash.sandbox →
// BATON_TOOLS_BASH_SANDBOX).
func envVar(key string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
}

// envVars returns the variables that set the dotted key, in order of
// precedence (BATON_LLM_API_KEY, then OPENAI_API_KEY), or nil for a key
// the environment cannot set (a list, read from the file only).
func envVars(key string) []string {
	f, ok := configField(key)
	if !ok || !envSettable(f.Type) {
		return nil
	}
	vars := []string{envVar(key)}
	if alias, ok := envAliases[key]; ok {
		vars = append(vars, alias)
	}
	return vars
}

// envSettable reports whether a key of type t can be set from the
// environment: scalars can; lists and sections cannot.
func envSettable(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Bool, reflect.String, reflect.Float64,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return true
	}
	return false
}

// configField returns the struct field of the dotted key (no list items).
func configField(key string) (reflect.StructField, bool) {
	t := reflect.TypeOf(Config{})
	var f reflect.StructField
	for part := range strings.SplitSeq(key, ".") {
		if t.Kind() != reflect.Struct {
			return reflect.StructField{}, false
		}
		var ok bool
		if f, ok = yamlFields(t)[part]; !ok {
			return reflect.StructField{}, false
		}
		t = f.Type
	}
	return f, true
}

// keyValue returns the settable value of the dotted key in c.
func (c *Config) keyValue(key string) (reflect.Value, bool) {
	v := reflect.ValueOf(c).Elem()
	for part := range strings.SplitSeq(key, ".") {
		if v.Kind() != reflect.Struct {
			return reflect.Value{}, false
		}
		f, ok := yamlFields(v.Type())[part]
		if !ok {
			return reflect.Value{}, false
		}
		v = v.FieldByIndex(f.Index)
	}
	return v, true
}

// eachKey calls fn with every leaf key of the struct value v (sections
// walked into, lists passed whole), its dotted name and its settable value.
func eachKey(v reflect.Value, prefix string, fn func(key string, v reflect.Value)) {
	t := v.Type()
	for i := range t.NumField() {
		name := yamlName(t.Field(i))
		switch {
		case name == "":
		case t.Field(i).Type.Kind() == reflect.Struct:
			eachKey(v.Field(i), prefix+name+".", fn)
		default:
			fn(prefix+name, v.Field(i))
		}
	}
}

// durationType is time.Duration's: an integer kind written as 30s.
var durationType = reflect.TypeOf(time.Duration(0))

// envValue reads the variable name. An empty variable counts as unset. A
// trailing carriage return (a .env file saved with Windows line endings)
// is removed and reported in cr; any other control character is refused,
// without showing the value, which may be a secret.
func envValue(env func(string) string, name string) (v string, cr bool, err error) {
	v = env(name)
	if trimmed, ok := strings.CutSuffix(v, "\r"); ok {
		v, cr = trimmed, true
	}
	if i := strings.IndexFunc(v, unicode.IsControl); i >= 0 {
		return "", false, fmt.Errorf("%s: the value holds a control character (%q at byte %d): write it on one line, without quotes that span lines (a .env file with Windows line endings: save it with LF)", name, v[i], i)
	}
	return v, cr, nil
}

// applyEnv sets every scalar key whose variable (envVars: BATON_<KEY>, or
// its alias such as OPENAI_API_KEY) is set, parsed as the key's type, and
// records the variable in origins. An empty variable is unset. A value that
// does not parse is a *ConfigError naming the key and the variable; all are
// reported at once.
func applyEnv(cfg *Config, env func(string) string, origins Origins) error {
	var errs []*ConfigError
	eachKey(reflect.ValueOf(cfg).Elem(), "", func(key string, v reflect.Value) {
		for _, name := range envVars(key) {
			raw, cr, err := envValue(env, name)
			if err != nil {
				errs = append(errs, &ConfigError{Key: key, Msg: err.Error()})
				return
			}
			if raw == "" {
				continue
			}
			if err := setScalar(v, raw); err != nil {
				errs = append(errs, &ConfigError{Key: key, Msg: fmt.Sprintf("%s: want %s, got %q", name, wantOf(key), raw)})
				return
			}
			origins[key] = Origin{Env: name, CR: cr}
			return // the first set variable wins
		}
	})
	return joinConfigErrors(errs)
}

// setScalar parses s as v's type and stores it in v.
func setScalar(v reflect.Value, s string) error {
	switch {
	case v.Type() == durationType:
		d, err := time.ParseDuration(s)
		if err != nil {
			return err
		}
		v.SetInt(int64(d))
	case v.Kind() == reflect.String:
		v.SetString(s)
	case v.Kind() == reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return err
		}
		v.SetBool(b)
	case v.Kind() == reflect.Float64:
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return err
		}
		v.SetFloat(f)
	case v.CanInt():
		n, err := strconv.ParseInt(s, 10, v.Type().Bits())
		if err != nil {
			return err
		}
		v.SetInt(n)
	default:
		return fmt.Errorf("%s cannot be set from the environment", v.Type())
	}
	return nil
}

// pathKeys are the keys that hold file system paths (resolvePaths).
var pathKeys = []string{"data_dir", "pieces_dir", "egress.ca_cert_file", "egress.ca_key_file", "egress.upstream_ca_file"}

// resolvePaths makes the relative paths in c absolute: a path the config
// file wrote against fileDir, the file's directory (so that a config means
// the same wherever Baton is started from), the others (the defaults, the
// environment's) against wd, the working directory.
func (c *Config) resolvePaths(wd, fileDir string, origins Origins) {
	for _, key := range pathKeys {
		v, ok := c.keyValue(key)
		if !ok || v.String() == "" || filepath.IsAbs(v.String()) {
			continue
		}
		base := wd
		if origins.Of(key).File != "" {
			base = fileDir
		}
		v.SetString(filepath.Join(base, v.String()))
	}
}

// Validate checks every value and returns all problems at once, each a
// *ConfigError naming its key (joined with errors.Join), or nil.
func (c Config) Validate() error {
	var v validator
	v.nonEmpty("data_dir", c.DataDir)
	v.nonEmpty("default_piece", c.DefaultPiece)
	v.oneOf("locale", c.Locale, "en", "ja")
	if c.Timezone == "" {
		v.fail("timezone", "must not be empty (use Local, UTC or an IANA name such as Asia/Tokyo)")
	} else if _, err := time.LoadLocation(c.Timezone); err != nil {
		v.fail("timezone", fmt.Sprintf("unknown time zone %q", c.Timezone))
	}

	v.url("llm.base_url", c.LLM.BaseURL, true, "http", "https")
	v.nonEmpty("llm.model", c.LLM.Model)
	v.positive("llm.context_window", int64(c.LLM.ContextWindow))
	v.positive("llm.max_output_tokens", int64(c.LLM.MaxOutputTokens))
	if c.LLM.ContextWindow > 0 && c.LLM.MaxOutputTokens >= c.LLM.ContextWindow {
		v.fail("llm.max_output_tokens", "must be smaller than llm.context_window")
	}
	v.duration("llm.request_timeout", c.LLM.RequestTimeout)
	v.notNegative("llm.max_retries", int64(c.LLM.MaxRetries))
	v.notNegative("llm.max_tokens_per_job", c.LLM.MaxTokensPerJob)
	v.oneOf("llm.provider", c.LLM.Provider, llm.ProviderNames()...)
	for _, alias := range slices.Sorted(maps.Keys(c.LLM.Models)) {
		if !modelAlias.MatchString(alias) || !modelAlias.MatchString(c.LLM.Models[alias]) {
			v.fail("llm.models."+alias, fmt.Sprintf("%q: %q is not an alias and a model name (letters, digits and . _ : / @ -)", alias, c.LLM.Models[alias]))
		}
	}
	if c.LLM.ReasoningEffort != "" {
		v.oneOf("llm.reasoning_effort", c.LLM.ReasoningEffort, "minimal", "low", "medium", "high")
	}
	v.validateBudgets(c)

	thresholds := []struct {
		key string
		val float64
	}{
		{"context.warn", c.Context.Warn},
		{"context.prompt", c.Context.Prompt},
		{"context.force_transition", c.Context.ForceTransition},
		{"context.exhausted", c.Context.Exhausted},
	}
	for i, th := range thresholds {
		if th.val <= 0 || th.val > 1 {
			v.fail(th.key, fmt.Sprintf("must be in (0, 1], got %v", th.val))
			continue
		}
		if i > 0 && th.val <= thresholds[i-1].val {
			v.fail(th.key, fmt.Sprintf("must be greater than %s (%v), got %v", thresholds[i-1].key, thresholds[i-1].val, th.val))
		}
	}
	v.positive("context.tool_result_max_tokens", int64(c.Context.ToolResultMaxTokens))
	v.oneOf("context.compaction", c.Context.Compaction, "on", "off")
	switch {
	case c.Context.Compaction != "on":
		// The thresholds are not used.
	case c.Context.Mask <= 0 || c.Context.Mask > 1:
		v.fail("context.mask", fmt.Sprintf("must be in (0, 1], got %v", c.Context.Mask))
	case c.Context.Compact <= 0 || c.Context.Compact > 1:
		v.fail("context.compact", fmt.Sprintf("must be in (0, 1], got %v", c.Context.Compact))
	case c.Context.Mask >= c.Context.Compact:
		v.fail("context.compact", fmt.Sprintf("must be greater than context.mask (%v), got %v", c.Context.Mask, c.Context.Compact))
	case c.Context.Compact >= c.Context.Prompt:
		v.fail("context.compact", fmt.Sprintf("must be less than context.prompt (%v): compaction comes before the wrap-up, got %v", c.Context.Prompt, c.Context.Compact))
	}

	v.notNegative("agent.reminder_after", int64(c.Agent.ReminderAfter))

	if c.Redis.enabled() {
		var ce *ConfigError
		if _, err := parseRedis(c.Redis); errors.As(err, &ce) {
			v.fail(ce.Key, ce.Msg)
		}
	}

	v.duration("queue.lease", c.Queue.Lease)
	v.duration("queue.heartbeat", c.Queue.Heartbeat)
	if c.Queue.Lease > 0 && c.Queue.Heartbeat >= c.Queue.Lease {
		v.fail("queue.heartbeat", "must be shorter than queue.lease")
	}
	v.positive("queue.max_failures", int64(c.Queue.MaxFailures))

	v.positive("workers.concurrency", int64(c.Workers.Concurrency))
	v.duration("workers.shutdown_grace", c.Workers.ShutdownGrace)

	v.oneOf("tools.bash.sandbox", c.Tools.Bash.Sandbox, "auto", "bwrap", "none")
	v.duration("tools.bash.timeout", c.Tools.Bash.Timeout)
	v.oneOf("tools.bash.network", c.Tools.Bash.Network, "deny", "allow_pieces")
	v.positive("tools.sandbox.uid", int64(c.Tools.Sandbox.UID))
	v.positive("tools.sandbox.gid", int64(c.Tools.Sandbox.GID))
	v.positive("tools.sandbox.max_processes", int64(c.Tools.Sandbox.MaxProcesses))
	v.positive("tools.sandbox.max_memory_bytes", c.Tools.Sandbox.MaxMemoryBytes)
	v.positive("tools.sandbox.max_open_files", int64(c.Tools.Sandbox.MaxOpenFiles))
	v.positive("tools.sandbox.max_file_bytes", c.Tools.Sandbox.MaxFileBytes)
	c.Egress.validate(&v)

	v.positive("files.max_bytes", c.Files.MaxBytes)
	v.duration("workspaces.retention", c.Workspaces.Retention)
	for _, r := range []struct {
		key string
		d   time.Duration
	}{{"retention.finished_jobs", c.Retention.FinishedJobs}, {"retention.events", c.Retention.Events}, {"retention.comments", c.Retention.Comments}} {
		if r.d < 0 {
			v.fail(r.key, fmt.Sprintf("must be a duration such as 8760h, or 0 to keep forever; got %s", r.d))
		}
	}
	v.notNegative("workspaces.max_bytes", c.Workspaces.MaxBytes)
	v.notNegative("workspaces.min_free_bytes", c.Workspaces.MinFreeBytes)

	v.addr("http.addr", c.HTTP.Addr, true)
	v.positive("http.max_connections", int64(c.HTTP.MaxConnections))
	v.addr("admin.addr", c.Admin.Addr, false)
	if c.Admin.Pprof && c.Admin.Addr == "" {
		v.fail("admin.pprof", "needs admin.addr: Go's profiles are served only on the operations listener, never on http.addr, which Slack and the task API reach")
	}
	if o := c.UI.OIDC; o.Issuer != "" {
		v.url("ui.oidc.issuer", o.Issuer, true, "https", "http")
		v.nonEmpty("ui.oidc.client_id", o.ClientID)
		v.url("ui.oidc.redirect_url", o.RedirectURL, true, "https", "http")
		if len(o.Allowed) == 0 {
			v.fail("ui.oidc.allowed", "must list the addresses (ann@example.com) or domains (@example.com) that may log in")
		}
		if c.UI.Token == "" {
			v.fail("ui.oidc.issuer", "needs ui.token: without it the dashboard is off")
		}
	}

	v.oneOf("log.format", c.Log.Format, "text", "json")
	v.oneOf("log.level", c.Log.Level, "debug", "info", "warn", "error")

	v.oneOf("slack.mode", c.Slack.Mode, "socket", "http")
	if u := c.Database.URL; u != "" && !strings.HasPrefix(u, "sqlite:") {
		if pu, err := url.Parse(u); err != nil || (pu.Scheme != "postgres" && pu.Scheme != "postgresql") || pu.Host == "" {
			// The URL is never shown: it may hold a password.
			v.fail("database.url", "must be empty (SQLite under data_dir), sqlite:PATH, or a postgres:// or postgresql:// URL with a host (DATABASE_URL)")
		}
	}
	if c.Database.URL == "sqlite:" {
		v.fail("database.url", "sqlite: needs a path (sqlite:/var/lib/baton/baton.db), or leave database.url empty for data_dir/baton.db")
	}
	if c.Database.MaxConns < 0 || c.Database.ConnectRetries < 0 || c.Database.StatementTimeout < 0 {
		v.fail("database", "max_conns, connect_retries and statement_timeout must not be negative")
	}
	v.url("slack.api_url", c.Slack.APIURL, true, "http", "https")
	if !slashCommand.MatchString(c.Slack.Command) {
		v.fail("slack.command", fmt.Sprintf("must be a slash command such as /baton (a /, then up to 31 lowercase letters, digits, - or _), got %q", c.Slack.Command))
	}
	if c.Slack.Enabled {
		v.secret("slack.bot_token", c.Slack.BotToken, "SLACK_BOT_TOKEN", "slack is enabled")
		v.tokenKind("slack.bot_token", c.Slack.BotToken, "SLACK_BOT_TOKEN", "xoxb-")
		switch c.Slack.Mode {
		case "socket":
			v.secret("slack.app_token", c.Slack.AppToken, "SLACK_APP_TOKEN", "slack.mode is socket")
			v.tokenKind("slack.app_token", c.Slack.AppToken, "SLACK_APP_TOKEN", "xapp-")
		case "http":
			v.secret("slack.signing_secret", c.Slack.SigningSecret, "SLACK_SIGNING_SECRET", "slack.mode is http")
		}
	}

	v.url("discord.api_url", c.Discord.APIURL, true, "http", "https")
	if c.Discord.Enabled {
		v.secret("discord.bot_token", c.Discord.BotToken, "DISCORD_BOT_TOKEN", "discord is enabled")
	}

	v.ids("access.admins", c.Access.Admins, userKinds)
	v.ids("access.allowed_users", c.Access.AllowedUsers, userKinds)
	v.ids("access.allowed_channels", c.Access.AllowedChannels, channelKinds)
	v.oneOf("access.abort_by", c.Access.AbortBy, "owner_and_admins", "anyone")
	v.oneOf("access.answer_by", c.Access.AnswerBy, "participants", "owner")

	v.duration("approvals.timeout", c.Approvals.Timeout)
	v.duration("progress.slack.interval", c.Progress.Slack.Interval)
	v.duration("progress.discord.interval", c.Progress.Discord.Interval)
	for _, e := range append(c.Approvals.problems(), c.MCP.problems()...) {
		v.errs = append(v.errs, e)
	}

	return errors.Join(v.errs...)
}

// slashCommand is the form Slack gives a slash command's name.
var slashCommand = regexp.MustCompile(`^/[a-z0-9_-]{1,31}$`)

// Platform prefixes accepted in access lists.
var (
	userKinds    = []string{"slack", "slack-group", "discord", "discord-role"}
	channelKinds = []string{"slack", "discord"}
)

// validator collects Validate's problems.
type validator struct {
	errs []error
}

func (v *validator) fail(key, msg string) {
	v.errs = append(v.errs, &ConfigError{Key: key, Msg: msg})
}

func (v *validator) nonEmpty(key, val string) {
	if strings.TrimSpace(val) == "" {
		v.fail(key, "must not be empty")
	}
}

func (v *validator) oneOf(key, val string, allowed ...string) {
	for _, a := range allowed {
		if val == a {
			return
		}
	}
	v.fail(key, fmt.Sprintf("must be one of %s, got %q", strings.Join(allowed, " | "), val))
}

func (v *validator) positive(key string, n int64) {
	if n <= 0 {
		v.fail(key, fmt.Sprintf("must be positive, got %d", n))
	}
}

func (v *validator) notNegative(key string, n int64) {
	if n < 0 {
		v.fail(key, fmt.Sprintf("must not be negative, got %d", n))
	}
}

func (v *validator) duration(key string, d time.Duration) {
	if d <= 0 {
		v.fail(key, fmt.Sprintf("must be a positive duration such as 30s, got %s", d))
	}
}

func (v *validator) url(key, val string, required bool, schemes ...string) {
	if val == "" {
		if required {
			v.fail(key, "must not be empty")
		}
		return
	}
	u, err := url.Parse(val)
	if err != nil {
		v.fail(key, fmt.Sprintf("not a URL: %v", errors.Unwrap(err)))
		return
	}
	for _, s := range schemes {
		if u.Scheme == s && (u.Host != "" || s == "unix") {
			return
		}
	}
	v.fail(key, fmt.Sprintf("must be a %s:// URL, got %q", strings.Join(schemes, ":// or "), val))
}

func (v *validator) addr(key, val string, required bool) {
	if val == "" {
		if required {
			v.fail(key, "must not be empty")
		}
		return
	}
	if _, port, err := net.SplitHostPort(val); err != nil || port == "" {
		v.fail(key, fmt.Sprintf("must be host:port, got %q", val))
	}
}

func (v *validator) secret(key string, s Secret, envName, why string) {
	if s == "" {
		v.fail(key, fmt.Sprintf("is required because %s (set it in the file or in %s)", why, envName))
	}
}

// tokenKind refuses a Slack token that is plainly another kind than want
// (an app-level token where the bot token goes, a user token): Slack would
// refuse it on every try. A token of no known prefix (a proxy's, a test's)
// is left to Slack, and to baton doctor.
func (v *validator) tokenKind(key string, s Secret, envName, want string) {
	tok := s.Reveal()
	if tok == "" || strings.HasPrefix(tok, want) {
		return
	}
	for _, k := range tokenKinds {
		if strings.HasPrefix(tok, k.prefix) {
			v.fail(key, fmt.Sprintf("%s %s (is %s set to the other token?)", envName, tokenProblem(s, want), envName))
			return
		}
	}
}

func (v *validator) ids(key string, ids []string, kinds []string) {
	for _, id := range ids {
		if msg := idProblem(id, kinds); msg != "" {
			v.fail(key, msg)
		}
	}
}

// idProblem says what is wrong with a platform-qualified id whose platform
// must be one of kinds, or "" when nothing is.
func idProblem(id string, kinds []string) string {
	kind, rest, ok := strings.Cut(id, ":")
	if ok && rest != "" && slices.Contains(kinds, kind) {
		return ""
	}
	return fmt.Sprintf("%q must be written as <platform>:<id> with platform one of %s", id, strings.Join(kinds, ", "))
}
