// Package helm_test checks Baton's Helm chart (deploy/helm/baton) with the
// helm binary: helm lint, and helm template with several value sets whose
// manifests it reads. No cluster runs where the tests run: what a cluster
// would refuse or need is checked on the rendered objects, and each
// Deployment's configuration (the ConfigMap's baton.yaml and the pod's
// environment) is handed to `baton config`, which must accept it.
//
// helm is $BATON_HELM, else helm on PATH; without it the tests skip, unless
// BATON_REQUIRE_HELM=1 (.ci/run builds Helm v3.22 and sets both).
package helm_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

const (
	chartDir = "baton"
	repoRoot = "../.."
)

// The Kubernetes objects, as far as the tests read them.
type (
	meta struct {
		Name        string            `yaml:"name"`
		Labels      map[string]string `yaml:"labels"`
		Annotations map[string]string `yaml:"annotations"`
	}
	object struct {
		Kind     string `yaml:"kind"`
		Metadata meta   `yaml:"metadata"`
	}
	deployment struct {
		Metadata meta `yaml:"metadata"`
		Spec     struct {
			Replicas int `yaml:"replicas"`
			Selector struct {
				MatchLabels map[string]string `yaml:"matchLabels"`
			} `yaml:"selector"`
			Template struct {
				Metadata meta    `yaml:"metadata"`
				Spec     podSpec `yaml:"spec"`
			} `yaml:"template"`
		} `yaml:"spec"`
	}
	podSpec struct {
		HostUsers                     *bool           `yaml:"hostUsers"`
		AutomountServiceAccountToken  *bool           `yaml:"automountServiceAccountToken"`
		SecurityContext               securityContext `yaml:"securityContext"`
		TerminationGracePeriodSeconds int             `yaml:"terminationGracePeriodSeconds"`
		Containers                    []container     `yaml:"containers"`
		Volumes                       []volume        `yaml:"volumes"`
	}
	securityContext struct {
		RunAsNonRoot             *bool    `yaml:"runAsNonRoot"`
		RunAsUser                *int     `yaml:"runAsUser"`
		AllowPrivilegeEscalation *bool    `yaml:"allowPrivilegeEscalation"`
		ReadOnlyRootFilesystem   *bool    `yaml:"readOnlyRootFilesystem"`
		Privileged               *bool    `yaml:"privileged"`
		ProcMount                string   `yaml:"procMount"`
		SeccompProfile           *profile `yaml:"seccompProfile"`
		AppArmorProfile          *profile `yaml:"appArmorProfile"`
		Capabilities             struct {
			Add  []string `yaml:"add"`
			Drop []string `yaml:"drop"`
		} `yaml:"capabilities"`
	}
	profile struct {
		Type string `yaml:"type"`
	}
	container struct {
		Name            string          `yaml:"name"`
		Image           string          `yaml:"image"`
		Command         []string        `yaml:"command"`
		Args            []string        `yaml:"args"`
		SecurityContext securityContext `yaml:"securityContext"`
		Ports           []struct {
			Name          string `yaml:"name"`
			ContainerPort int    `yaml:"containerPort"`
		} `yaml:"ports"`
		Env            []envVar `yaml:"env"`
		StartupProbe   *probe   `yaml:"startupProbe"`
		LivenessProbe  *probe   `yaml:"livenessProbe"`
		ReadinessProbe *probe   `yaml:"readinessProbe"`
		VolumeMounts   []struct {
			Name      string `yaml:"name"`
			MountPath string `yaml:"mountPath"`
		} `yaml:"volumeMounts"`
	}
	envVar struct {
		Name      string  `yaml:"name"`
		Value     *string `yaml:"value"`
		ValueFrom *struct {
			SecretKeyRef *secretRef `yaml:"secretKeyRef"`
		} `yaml:"valueFrom"`
	}
	secretRef struct {
		Name string `yaml:"name"`
		Key  string `yaml:"key"`
	}
	probe struct {
		HTTPGet *struct {
			Path string `yaml:"path"`
			Port string `yaml:"port"`
		} `yaml:"httpGet"`
	}
	volume struct {
		Name                  string `yaml:"name"`
		PersistentVolumeClaim *struct {
			ClaimName string `yaml:"claimName"`
		} `yaml:"persistentVolumeClaim"`
		ConfigMap *struct {
			Name string `yaml:"name"`
		} `yaml:"configMap"`
	}
	service struct {
		Metadata meta `yaml:"metadata"`
		Spec     struct {
			Selector map[string]string `yaml:"selector"`
			Ports    []struct {
				Port       int    `yaml:"port"`
				TargetPort string `yaml:"targetPort"`
			} `yaml:"ports"`
		} `yaml:"spec"`
	}
	claim struct {
		Metadata meta `yaml:"metadata"`
		Spec     struct {
			AccessModes []string `yaml:"accessModes"`
			Resources   struct {
				Requests map[string]string `yaml:"requests"`
			} `yaml:"resources"`
		} `yaml:"spec"`
	}
	configMap struct {
		Metadata meta              `yaml:"metadata"`
		Data     map[string]string `yaml:"data"`
	}
)

// rendered is the output of one helm template.
type rendered struct {
	text     string
	objects  []object
	gateway  deployment
	worker   deployment
	services []service
	claims   []claim
	config   configMap
}

// helmBin returns the helm binary, skipping t without one unless
// BATON_REQUIRE_HELM=1.
func helmBin(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("BATON_HELM")
	if bin == "" {
		var err error
		if bin, err = exec.LookPath("helm"); err != nil {
			bin = ""
		}
	}
	if bin == "" {
		if os.Getenv("BATON_REQUIRE_HELM") == "1" {
			t.Fatal("no helm: set BATON_HELM or put helm on PATH (BATON_REQUIRE_HELM=1)")
		}
		t.Skip("no helm on PATH and BATON_HELM unset (set BATON_REQUIRE_HELM=1 to fail instead)")
	}
	return bin
}

// helm runs helm args… and returns its stdout and stderr.
func helm(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errb bytes.Buffer
	cmd := exec.Command(helmBin(t), args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	// No kubeconfig, repository or plugin of the machine's is read.
	home := t.TempDir()
	cmd.Env = append(os.Environ(), "HELM_CONFIG_HOME="+home, "HELM_CACHE_HOME="+home, "HELM_DATA_HOME="+home, "KUBECONFIG="+filepath.Join(home, "none"))
	err = cmd.Run()
	return out.String(), errb.String(), err
}

// valuesFile writes values to a file for helm's -f, in a directory of its
// own: helm splits -f at commas, which a test's name (and so t.TempDir)
// may hold.
func valuesFile(t *testing.T, values string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "baton-values-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "values.yaml")
	if err := os.WriteFile(path, []byte(values), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// render runs helm lint --strict and helm template on values and reads
// the manifests.
func render(t *testing.T, values string) rendered {
	t.Helper()
	vf := valuesFile(t, values)
	if out, errOut, err := helm(t, "lint", "--strict", chartDir, "-f", vf); err != nil {
		t.Fatalf("helm lint --strict: %v\n%s%s", err, out, errOut)
	}
	out, errOut, err := helm(t, "template", "baton", chartDir, "--namespace", "chat", "-f", vf)
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, errOut)
	}
	r := rendered{text: out}
	dec := yaml.NewDecoder(strings.NewReader(out))
	for {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("the manifests do not parse: %v\n%s", err, out)
		}
		var o object
		if err := n.Decode(&o); err != nil {
			t.Fatal(err)
		}
		if o.Kind == "" {
			continue // an empty document
		}
		r.objects = append(r.objects, o)
		decode := func(v any) {
			if err := n.Decode(v); err != nil {
				t.Fatalf("%s %s: %v", o.Kind, o.Metadata.Name, err)
			}
		}
		switch o.Kind {
		case "Deployment":
			var d deployment
			decode(&d)
			switch c := d.Metadata.Labels["app.kubernetes.io/component"]; c {
			case "gateway":
				r.gateway = d
			case "worker":
				r.worker = d
			default:
				t.Errorf("Deployment %s of component %q", d.Metadata.Name, c)
			}
		case "Service":
			var s service
			decode(&s)
			r.services = append(r.services, s)
		case "PersistentVolumeClaim":
			var c claim
			decode(&c)
			r.claims = append(r.claims, c)
		case "ConfigMap":
			decode(&r.config)
		}
	}
	var kinds []string
	for _, o := range r.objects {
		kinds = append(kinds, o.Kind)
	}
	if n := strings.Count(strings.Join(kinds, " "), "Deployment"); n != 2 || len(r.gateway.Spec.Template.Spec.Containers) != 1 || len(r.worker.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("%d Deployments (%v): want a gateway and a worker, one container each", n, kinds)
	}
	return r
}

// env returns the container's variable name, or nil.
func (c container) env(name string) *envVar {
	for i := range c.Env {
		if c.Env[i].Name == name {
			return &c.Env[i]
		}
	}
	return nil
}

// port returns the number of the container's port name, or 0.
func (c container) port(name string) int {
	for _, p := range c.Ports {
		if p.Name == name {
			return p.ContainerPort
		}
	}
	return 0
}

// mount returns where the container mounts volume name, or "".
func (c container) mount(name string) string {
	for _, m := range c.VolumeMounts {
		if m.Name == name {
			return m.MountPath
		}
	}
	return ""
}

func (p podSpec) volume(name string) *volume {
	for i := range p.Volumes {
		if p.Volumes[i].Name == name {
			return &p.Volumes[i]
		}
	}
	return nil
}

// secretVars are the variables that carry a secret: each must come from a
// Secret, never a value.
var secretVars = []string{
	"BATON_DATABASE_URL", "DATABASE_URL",
	"BATON_LLM_API_KEY", "OPENAI_API_KEY",
	"BATON_SLACK_BOT_TOKEN", "SLACK_BOT_TOKEN",
	"BATON_SLACK_APP_TOKEN", "SLACK_APP_TOKEN",
	"BATON_SLACK_SIGNING_SECRET", "SLACK_SIGNING_SECRET",
	"BATON_DISCORD_BOT_TOKEN", "DISCORD_BOT_TOKEN",
	"BATON_API_TOKEN",
	"BATON_REDIS_CLUSTER_PASSWORD",
}

// chartCase is a value set and what its manifests must show.
type chartCase struct {
	name   string
	values string
	// gatewaySecrets and workerSecrets: every variable read from a Secret,
	// and which.
	gatewaySecrets, workerSecrets map[string]secretRef
	// redisURL is BATON_REDIS_URL's plain value, "" when it comes from a
	// Secret.
	redisURL string
	claim    string // the workspaces' claim
	created  bool   // the chart creates the claim
	sandbox  bool   // worker.sandbox.enabled
	gatewayN int
	workerN  int
}

var cases = []chartCase{
	{
		name:   "defaults",
		values: "",
		gatewaySecrets: map[string]secretRef{
			"BATON_DATABASE_URL": {"baton", "DATABASE_URL"},
			"BATON_REDIS_URL":    {"baton", "REDIS_URL"},
		},
		workerSecrets: map[string]secretRef{
			"BATON_DATABASE_URL": {"baton", "DATABASE_URL"},
			"BATON_REDIS_URL":    {"baton", "REDIS_URL"},
			"BATON_LLM_API_KEY":  {"baton", "OPENAI_API_KEY"},
		},
		claim: "baton-workspaces", created: true, gatewayN: 1, workerN: 1,
	},
	{
		name: "everything on",
		values: `
image: {repository: registry.example.com/baton, tag: v9.9.9}
config:
  slack: {enabled: true, mode: socket}
  discord: {enabled: true}
  workers: {concurrency: 2, shutdown_grace: 40s}
  access: {admins: ["slack:U123"]}
secrets:
  existingSecret: baton-creds
  llmApiKey: {name: model-key, key: KEY}
  apiToken: {key: API_TOKEN}
workspaces: {existingClaim: shared-workspaces}
gateway: {replicas: 2}
worker:
  replicas: 3
  terminationGracePeriodSeconds: 60
  sandbox: {enabled: true}
`,
		gatewaySecrets: map[string]secretRef{
			"BATON_DATABASE_URL":      {"baton-creds", "DATABASE_URL"},
			"BATON_REDIS_URL":         {"baton-creds", "REDIS_URL"},
			"BATON_SLACK_BOT_TOKEN":   {"baton-creds", "SLACK_BOT_TOKEN"},
			"BATON_SLACK_APP_TOKEN":   {"baton-creds", "SLACK_APP_TOKEN"},
			"BATON_DISCORD_BOT_TOKEN": {"baton-creds", "DISCORD_BOT_TOKEN"},
			"BATON_API_TOKEN":         {"baton-creds", "API_TOKEN"},
		},
		workerSecrets: map[string]secretRef{
			"BATON_DATABASE_URL": {"baton-creds", "DATABASE_URL"},
			"BATON_REDIS_URL":    {"baton-creds", "REDIS_URL"},
			"BATON_LLM_API_KEY":  {"model-key", "KEY"},
		},
		claim: "shared-workspaces", sandbox: true, gatewayN: 2, workerN: 3,
	},
	{
		name: "slack http, redis without a password, no model key",
		values: `
config:
  slack: {enabled: true, mode: http}
secrets:
  llmApiKey: {key: ""}
  slackSigningSecret: {name: slack, key: signing}
redis: {url: "redis://redis.chat.svc:6379/0"}
workspaces: {storageClassName: nfs, size: 5Gi, keep: false}
`,
		gatewaySecrets: map[string]secretRef{
			"BATON_DATABASE_URL":         {"baton", "DATABASE_URL"},
			"BATON_SLACK_BOT_TOKEN":      {"baton", "SLACK_BOT_TOKEN"},
			"BATON_SLACK_SIGNING_SECRET": {"slack", "signing"},
		},
		workerSecrets: map[string]secretRef{
			"BATON_DATABASE_URL": {"baton", "DATABASE_URL"},
		},
		redisURL: "redis://redis.chat.svc:6379/0",
		claim:    "baton-workspaces", created: true, gatewayN: 1, workerN: 1,
	},
	{
		name: "redis cluster with a password",
		values: `
config:
  redis: {cluster_addrs: ["redis-0.redis:6379", "redis-1.redis:6379"], cluster_username: baton, cluster_tls: true}
secrets:
  redisClusterPassword: {name: redis, key: password}
`,
		gatewaySecrets: map[string]secretRef{
			"BATON_DATABASE_URL":           {"baton", "DATABASE_URL"},
			"BATON_REDIS_CLUSTER_PASSWORD": {"redis", "password"},
		},
		workerSecrets: map[string]secretRef{
			"BATON_DATABASE_URL":           {"baton", "DATABASE_URL"},
			"BATON_REDIS_CLUSTER_PASSWORD": {"redis", "password"},
			"BATON_LLM_API_KEY":            {"baton", "OPENAI_API_KEY"},
		},
		claim: "baton-workspaces", created: true, gatewayN: 1, workerN: 1,
	},
}

func TestChart(t *testing.T) {
	helmBin(t)
	uid := dockerfileUID(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := render(t, tc.values)
			gw, wk := r.gateway.Spec.Template.Spec.Containers[0], r.worker.Spec.Template.Spec.Containers[0]

			t.Run("commands", func(t *testing.T) {
				for _, d := range []struct {
					dep  deployment
					want string
					n    int
				}{{r.gateway, "gateway", tc.gatewayN}, {r.worker, "worker", tc.workerN}} {
					c := d.dep.Spec.Template.Spec.Containers[0]
					// The image's ENTRYPOINT is baton: the arguments are the subcommand.
					if len(c.Command) != 0 || !slices.Equal(c.Args, []string{d.want}) {
						t.Errorf("%s: command %q args %q, want the image's entrypoint with [%s]", d.dep.Metadata.Name, c.Command, c.Args, d.want)
					}
					if d.dep.Spec.Replicas != d.n {
						t.Errorf("%s: %d replicas, want %d", d.dep.Metadata.Name, d.dep.Spec.Replicas, d.n)
					}
					for k, v := range d.dep.Spec.Selector.MatchLabels {
						if d.dep.Spec.Template.Metadata.Labels[k] != v {
							t.Errorf("%s: the selector's %s=%s is not on the pods", d.dep.Metadata.Name, k, v)
						}
					}
				}
			})

			t.Run("probes", func(t *testing.T) {
				for _, c := range []container{gw, wk} {
					admin := addrPort(t, c, "BATON_ADMIN_ADDR")
					for _, p := range []struct {
						kind  string
						probe *probe
						path  string
					}{{"startup", c.StartupProbe, "/healthz"}, {"liveness", c.LivenessProbe, "/healthz"}, {"readiness", c.ReadinessProbe, "/readyz"}} {
						if p.probe == nil || p.probe.HTTPGet == nil {
							t.Errorf("%s: no %s probe", c.Name, p.kind)
							continue
						}
						if g := p.probe.HTTPGet; g.Path != p.path || c.port(g.Port) != admin {
							t.Errorf("%s: %s probe GET %s on port %q (%d), want %s on admin.addr's port %d", c.Name, p.kind, g.Path, g.Port, c.port(g.Port), p.path, admin)
						}
					}
				}
				if wk.port("http") != 0 || wk.env("BATON_HTTP_ADDR") != nil {
					t.Errorf("the worker has an http port or http.addr: a worker opens no http.addr")
				}
			})

			t.Run("service", func(t *testing.T) {
				if len(r.services) != 1 {
					t.Fatalf("%d Services, want 1 (the gateways')", len(r.services))
				}
				s := r.services[0]
				if !selects(s.Spec.Selector, r.gateway.Spec.Template.Metadata.Labels) || selects(s.Spec.Selector, r.worker.Spec.Template.Metadata.Labels) {
					t.Errorf("the Service selects %v: want the gateways only", s.Spec.Selector)
				}
				http := addrPort(t, gw, "BATON_HTTP_ADDR")
				if len(s.Spec.Ports) != 1 || gw.port(s.Spec.Ports[0].TargetPort) != http {
					t.Errorf("the Service's ports %v: want one targeting http.addr's port %d", s.Spec.Ports, http)
				}
				if admin := addrPort(t, gw, "BATON_ADMIN_ADDR"); admin == http {
					t.Errorf("admin.addr and http.addr share port %d: /metrics would be in the Service", admin)
				}
			})

			t.Run("secrets", func(t *testing.T) {
				for _, o := range r.objects {
					if o.Kind == "Secret" {
						t.Errorf("the chart renders Secret %s: it must only refer to Secrets", o.Metadata.Name)
					}
				}
				for _, d := range []struct {
					c    container
					want map[string]secretRef
				}{{gw, tc.gatewaySecrets}, {wk, tc.workerSecrets}} {
					got := map[string]secretRef{}
					for _, e := range d.c.Env {
						if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
							got[e.Name] = *e.ValueFrom.SecretKeyRef
						} else if slices.Contains(secretVars, e.Name) {
							t.Errorf("%s: %s is not read from a Secret", d.c.Name, e.Name)
						}
					}
					if !equalMaps(got, d.want) {
						t.Errorf("%s reads from Secrets %v, want %v", d.c.Name, got, d.want)
					}
				}
				for _, c := range []container{gw, wk} {
					e := c.env("BATON_REDIS_URL")
					switch {
					case tc.redisURL == "":
					case e == nil || e.Value == nil || *e.Value != tc.redisURL:
						t.Errorf("%s: BATON_REDIS_URL %v, want the plain %s", c.Name, e, tc.redisURL)
					}
				}
				// Nothing that looks like a credential is written anywhere.
				for _, re := range credentialLike {
					if m := re.FindString(r.text); m != "" {
						t.Errorf("the manifests hold %q, which looks like a credential", m)
					}
				}
			})

			t.Run("workspaces", func(t *testing.T) {
				switch {
				case tc.created && (len(r.claims) != 1 || r.claims[0].Metadata.Name != tc.claim):
					t.Errorf("claims %v, want one named %s", r.claims, tc.claim)
				case tc.created:
					c := r.claims[0]
					if !slices.Equal(c.Spec.AccessModes, []string{"ReadWriteMany"}) || c.Spec.Resources.Requests["storage"] == "" {
						t.Errorf("claim %s: access modes %v, storage %q: want ReadWriteMany and a size", c.Metadata.Name, c.Spec.AccessModes, c.Spec.Resources.Requests["storage"])
					}
				case len(r.claims) != 0:
					t.Errorf("claims %v, want none beside the existing %s", r.claims, tc.claim)
				}
				for _, d := range []deployment{r.gateway, r.worker} {
					c := d.Spec.Template.Spec.Containers[0]
					root := c.env("BATON_WORKSPACES_ROOT")
					var claimed string
					for _, v := range d.Spec.Template.Spec.Volumes {
						if v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == tc.claim {
							claimed = c.mount(v.Name)
						}
					}
					if root == nil || root.Value == nil || claimed == "" || claimed != *root.Value {
						t.Errorf("%s: claim %s mounted at %q, workspaces.root %v: want the claim at workspaces.root", d.Metadata.Name, tc.claim, claimed, root)
					}
					cfg := c.env("BATON_CONFIG")
					v := d.Spec.Template.Spec.volume("config")
					if cfg == nil || cfg.Value == nil || v == nil || v.ConfigMap == nil || v.ConfigMap.Name != r.config.Metadata.Name || filepath.Join(c.mount("config"), "baton.yaml") != *cfg.Value {
						t.Errorf("%s: BATON_CONFIG %v is not the ConfigMap %s's baton.yaml", d.Metadata.Name, cfg, r.config.Metadata.Name)
					}
				}
			})

			t.Run("security", func(t *testing.T) {
				for _, d := range []deployment{r.gateway, r.worker} {
					p, c := d.Spec.Template.Spec, d.Spec.Template.Spec.Containers[0]
					if p.SecurityContext.RunAsNonRoot == nil || !*p.SecurityContext.RunAsNonRoot || p.SecurityContext.RunAsUser == nil || *p.SecurityContext.RunAsUser != uid {
						t.Errorf("%s: pod security %v, want runAsNonRoot and the image's user %d", d.Metadata.Name, p.SecurityContext, uid)
					}
					if p.AutomountServiceAccountToken == nil || *p.AutomountServiceAccountToken {
						t.Errorf("%s mounts a service account token", d.Metadata.Name)
					}
					sc := c.SecurityContext
					if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || !slices.Equal(sc.Capabilities.Drop, []string{"ALL"}) || len(sc.Capabilities.Add) > 0 || (sc.Privileged != nil && *sc.Privileged) {
						t.Errorf("%s: container security %v, want no escalation, no privilege, every capability dropped", d.Metadata.Name, sc)
					}
					if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || c.mount("tmp") != "/tmp" {
						t.Errorf("%s: want a read-only root with /tmp mounted", d.Metadata.Name)
					}
				}
				// The gateway runs no commands: it is never loosened, and
				// starts whatever tools.bash.sandbox says.
				if unconfined(r.gateway) {
					t.Error("the gateway is loosened for the sandbox")
				}
				if e := gw.env("BATON_TOOLS_BASH_SANDBOX"); e == nil || e.Value == nil || *e.Value != "auto" {
					t.Errorf("the gateway's BATON_TOOLS_BASH_SANDBOX %v, want auto", e)
				}
				// The worker posts through the outbox: no adapter runs on it.
				for _, name := range []string{"BATON_SLACK_ENABLED", "BATON_DISCORD_ENABLED"} {
					if e := wk.env(name); e == nil || e.Value == nil || *e.Value != "false" {
						t.Errorf("the worker's %s %v, want false", name, e)
					}
				}
				p, sc, mode := r.worker.Spec.Template.Spec, wk.SecurityContext, wk.env("BATON_TOOLS_BASH_SANDBOX")
				if !tc.sandbox {
					if unconfined(r.worker) || mode != nil {
						t.Errorf("worker.sandbox is off but the worker is loosened (%v) or sets tools.bash.sandbox (%v)", sc, mode)
					}
					return
				}
				if p.HostUsers == nil || *p.HostUsers || sc.ProcMount != "Unmasked" || sc.SeccompProfile == nil || sc.SeccompProfile.Type != "Unconfined" || sc.AppArmorProfile == nil || sc.AppArmorProfile.Type != "Unconfined" {
					t.Errorf("worker with the sandbox: hostUsers %s, security %v: want its own user namespace, an unmasked /proc, seccomp and AppArmor unconfined", boolString(p.HostUsers), sc)
				}
				if mode == nil || mode.Value == nil || *mode.Value != "bwrap" {
					t.Errorf("worker with the sandbox: BATON_TOOLS_BASH_SANDBOX %v, want bwrap (refuse to start without it)", mode)
				}
			})

			t.Run("shutdown", func(t *testing.T) {
				grace := shutdownGrace(t, r.config.Data["baton.yaml"])
				if got := time.Duration(r.worker.Spec.Template.Spec.TerminationGracePeriodSeconds) * time.Second; got <= grace+5*time.Second {
					t.Errorf("the worker's terminationGracePeriodSeconds %v does not outlast workers.shutdown_grace %v and 5 s for the admin server: the kubelet would kill running jobs", got, grace)
				}
			})

			t.Run("baton config", func(t *testing.T) {
				for _, c := range []container{gw, wk} {
					checkConfig(t, r.config.Data["baton.yaml"], c)
				}
			})
		})
	}
}

// credentialLike finds what the manifests must never hold: tokens, keys,
// URLs with a password.
var credentialLike = []*regexp.Regexp{
	regexp.MustCompile(`xox[abpr]-\S*`),
	regexp.MustCompile(`xapp-\S*`),
	regexp.MustCompile(`\bsk-\S+`),
	regexp.MustCompile(`[a-z+]+://[^/\s"]*:[^/\s"@]*@\S*`),
	regexp.MustCompile(`CANARY\S*`),
}

// String shows the fields set, for messages.
func (s securityContext) String() string {
	var parts []string
	add := func(name string, v any) { parts = append(parts, fmt.Sprintf("%s=%v", name, v)) }
	for _, f := range []struct {
		name string
		v    *bool
	}{{"runAsNonRoot", s.RunAsNonRoot}, {"allowPrivilegeEscalation", s.AllowPrivilegeEscalation}, {"readOnlyRootFilesystem", s.ReadOnlyRootFilesystem}, {"privileged", s.Privileged}} {
		if f.v != nil {
			add(f.name, *f.v)
		}
	}
	if s.RunAsUser != nil {
		add("runAsUser", *s.RunAsUser)
	}
	if s.ProcMount != "" {
		add("procMount", s.ProcMount)
	}
	if s.SeccompProfile != nil {
		add("seccompProfile", s.SeccompProfile.Type)
	}
	if s.AppArmorProfile != nil {
		add("appArmorProfile", s.AppArmorProfile.Type)
	}
	add("capabilities", fmt.Sprintf("add %v drop %v", s.Capabilities.Add, s.Capabilities.Drop))
	return "{" + strings.Join(parts, " ") + "}"
}

// String shows the variable's value or its Secret, for messages.
func (e *envVar) String() string {
	switch {
	case e == nil:
		return "unset"
	case e.Value != nil:
		return fmt.Sprintf("%s=%q", e.Name, *e.Value)
	case e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil:
		return fmt.Sprintf("%s from Secret %s key %s", e.Name, e.ValueFrom.SecretKeyRef.Name, e.ValueFrom.SecretKeyRef.Key)
	}
	return e.Name + " (valueFrom)"
}

func boolString(b *bool) string {
	if b == nil {
		return "unset"
	}
	return strconv.FormatBool(*b)
}

// unconfined reports whether d's pod or container is loosened for
// bubblewrap.
func unconfined(d deployment) bool {
	p := d.Spec.Template.Spec
	sc := p.Containers[0].SecurityContext
	for _, pr := range []*profile{p.SecurityContext.SeccompProfile, sc.SeccompProfile, sc.AppArmorProfile} {
		if pr != nil && pr.Type == "Unconfined" {
			return true
		}
	}
	return p.HostUsers != nil || sc.ProcMount != ""
}

// selects reports whether selector matches labels.
func selects(selector, labels map[string]string) bool {
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return len(selector) > 0
}

func equalMaps(a, b map[string]secretRef) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// addrPort returns the port of the host:port in the container's variable.
func addrPort(t *testing.T, c container, name string) int {
	t.Helper()
	e := c.env(name)
	if e == nil || e.Value == nil {
		t.Fatalf("%s sets no %s", c.Name, name)
	}
	_, port, err := net.SplitHostPort(*e.Value)
	if err != nil {
		t.Fatalf("%s: %s=%q: %v", c.Name, name, *e.Value, err)
	}
	n, err := strconv.Atoi(port)
	if err != nil {
		t.Fatalf("%s: %s=%q: %v", c.Name, name, *e.Value, err)
	}
	return n
}

// dockerfileUID is the uid of the image's user (useradd --uid N).
func dockerfileUID(t *testing.T) int {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`useradd [^\n]*--uid (\d+)`).FindSubmatch(data)
	if m == nil {
		t.Fatal("the Dockerfile makes no user with useradd --uid")
	}
	uid, _ := strconv.Atoi(string(m[1]))
	return uid
}

// shutdownGrace is workers.shutdown_grace in the chart's baton.yaml, else
// in configs/baton.yaml (the defaults).
func shutdownGrace(t *testing.T, batonYAML string) time.Duration {
	t.Helper()
	type workers struct {
		Workers struct {
			ShutdownGrace string `yaml:"shutdown_grace"`
		} `yaml:"workers"`
	}
	var chart, defaults workers
	if err := yaml.Unmarshal([]byte(batonYAML), &chart); err != nil {
		t.Fatalf("the ConfigMap's baton.yaml: %v", err)
	}
	data, err := os.ReadFile(filepath.Join(repoRoot, "configs", "baton.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &defaults); err != nil {
		t.Fatal(err)
	}
	s := chart.Workers.ShutdownGrace
	if s == "" {
		s = defaults.Workers.ShutdownGrace
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatalf("workers.shutdown_grace %q: %v", s, err)
	}
	return d
}

// fakeSecrets stand for what a Secret would hold, by variable: what
// Validate accepts.
var fakeSecrets = map[string]string{
	"BATON_DATABASE_URL":           "postgres://baton:pw@db:5432/baton",
	"BATON_REDIS_URL":              "redis://:pw@redis:6379/0",
	"BATON_LLM_API_KEY":            "test-key",
	"BATON_SLACK_BOT_TOKEN":        "xoxb-test",
	"BATON_SLACK_APP_TOKEN":        "xapp-test",
	"BATON_SLACK_SIGNING_SECRET":   "test-signing-secret",
	"BATON_DISCORD_BOT_TOKEN":      "test-discord-token",
	"BATON_API_TOKEN":              "test-api-token",
	"BATON_REDIS_CLUSTER_PASSWORD": "test-cluster-password",
}

// checkConfig runs `baton config` on the ConfigMap's baton.yaml with c's
// environment (the Secrets' variables given fake values), as the pod
// would start: Baton must accept it.
func checkConfig(t *testing.T, batonYAML string, c container) {
	t.Helper()
	bin := batonBin(t)
	path := filepath.Join(t.TempDir(), "baton.yaml")
	if err := os.WriteFile(path, []byte(batonYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	for _, e := range c.Env {
		switch {
		case e.Name == "BATON_CONFIG":
			env = append(env, "BATON_CONFIG="+path)
		case e.Value != nil:
			env = append(env, e.Name+"="+*e.Value)
		case e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil:
			v, ok := fakeSecrets[e.Name]
			if !ok {
				t.Errorf("%s: no fake value for %s", c.Name, e.Name)
			}
			env = append(env, e.Name+"="+v)
		}
	}
	cmd := exec.Command(bin, "config")
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Errorf("%s: baton config with the pod's configuration: %v\n%s", c.Name, err, out)
		return
	}
	// The chart's listeners took: admin.addr from the environment.
	if !strings.Contains(string(out), "environment BATON_ADMIN_ADDR") {
		t.Errorf("%s: baton config does not show admin.addr from BATON_ADMIN_ADDR:\n%s", c.Name, out)
	}
}

var (
	batonOnce sync.Once
	batonPath string
	batonErr  error
)

// batonBin builds ./bot once for the package's tests.
func batonBin(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the baton binary; skipped with -short")
	}
	batonOnce.Do(func() {
		dir, err := os.MkdirTemp("", "baton-chart-")
		if err != nil {
			batonErr = err
			return
		}
		batonPath = filepath.Join(dir, "baton")
		cmd := exec.Command("go", "build", "-o", batonPath, "./bot")
		cmd.Dir = repoRoot
		if out, err := cmd.CombinedOutput(); err != nil {
			batonErr = fmt.Errorf("go build ./bot: %v\n%s", err, out)
		}
	})
	if batonErr != nil {
		t.Fatal(batonErr)
	}
	return batonPath
}

func TestMain(m *testing.M) {
	code := m.Run()
	if batonPath != "" {
		os.RemoveAll(filepath.Dir(batonPath))
	}
	os.Exit(code)
}

// TestChartRefuses: values that would write a secret into the manifests,
// fight the chart over a key it owns or leave Baton unable to start fail
// the render with a message naming what to set instead, and never repeat
// the secret.
func TestChartRefuses(t *testing.T) {
	helmBin(t)
	for _, tc := range []struct {
		name, values, want string
	}{
		{"model key inline", "config: {llm: {api_key: sk-CANARY1}}", "secrets.llmApiKey"},
		{"slack token inline", "config: {slack: {enabled: true, bot_token: xoxb-CANARY2}}", "secrets.slackBotToken"},
		{"signing secret inline", "config: {slack: {signing_secret: CANARY3}}", "secrets.slackSigningSecret"},
		{"discord token inline", "config: {discord: {bot_token: CANARY4}}", "secrets.discordBotToken"},
		{"api token inline", "config: {api: {token: CANARY5}}", "secrets.apiToken"},
		{"database URL inline", "config: {database: {url: 'postgres://baton:CANARY6@db/baton'}}", "secrets.databaseUrl"},
		{"redis URL in config", "config: {redis: {url: 'redis://:CANARY7@redis:6379/0'}}", "secrets.redisUrl"},
		{"redis URL with a password", "redis: {url: 'redis://:CANARY8@redis:6379/0'}", "secrets.redisUrl"},
		{"redis URL with a user and password", "redis: {url: 'rediss://baton:CANARY9@redis:6380/0'}", "secrets.redisUrl"},
		{"cluster password inline", "config: {redis: {cluster_addrs: ['r:6379'], cluster_password: CANARY0}}", "secrets.redisClusterPassword"},
		{"bwrap without the sandbox's settings", "config: {tools: {bash: {sandbox: bwrap}}}", "worker.sandbox.enabled"},
		{"http.addr", "config: {http: {addr: '0.0.0.0:1'}}", "config.http.addr"},
		{"admin.addr", "config: {admin: {addr: '0.0.0.0:1'}}", "config.admin.addr"},
		{"data_dir", "config: {data_dir: /x}", "config.data_dir"},
		{"workspaces.root", "config: {workspaces: {root: /x}}", "config.workspaces.root"},
		{"no database", "secrets: {databaseUrl: {key: ''}}", "secrets.databaseUrl.key"},
		{"no redis", "secrets: {redisUrl: {key: ''}}", "secrets.redisUrl.key"},
		{"slack without its bot token", "config: {slack: {enabled: true}}\nsecrets: {slackBotToken: {key: ''}}", "secrets.slackBotToken.key"},
		{"slack socket without its app token", "config: {slack: {enabled: true}}\nsecrets: {slackAppToken: {key: ''}}", "secrets.slackAppToken.key"},
		{"slack http without its signing secret", "config: {slack: {enabled: true, mode: http}}\nsecrets: {slackSigningSecret: {key: ''}}", "secrets.slackSigningSecret.key"},
		{"discord without its token", "config: {discord: {enabled: true}}\nsecrets: {discordBotToken: {key: ''}}", "secrets.discordBotToken.key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// helm lint reports a template's fail as information only:
			// helm template (and install) is what refuses.
			out, errOut, err := helm(t, "template", "baton", chartDir, "-f", valuesFile(t, tc.values))
			if err == nil {
				t.Fatalf("helm template passed, want a refusal naming %s", tc.want)
			}
			if !strings.Contains(errOut, tc.want) {
				t.Errorf("helm template: %v, want a message naming %s:\n%s", err, tc.want, errOut)
			}
			if m := regexp.MustCompile(`CANARY\d`).FindString(out + errOut); m != "" {
				t.Errorf("helm template repeats the secret %s:\n%s%s", m, out, errOut)
			}
		})
	}
}

// TestChartNotes renders NOTES.txt (helm template leaves it out, so it is
// rendered through a copy of the chart): it names the Secret keys the pods
// read and says whether the Bash tool is sandboxed or off.
func TestChartNotes(t *testing.T) {
	helmBin(t)
	dir := filepath.Join(t.TempDir(), "baton")
	if err := os.CopyFS(dir, os.DirFS(chartDir)); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "templates", "NOTES.txt"), filepath.Join(dir, "notes.txt")); err != nil {
		t.Fatal(err)
	}
	wrapper := "kind: Notes\ntext: |\n{{ tpl (.Files.Get \"notes.txt\") . | indent 2 }}\n"
	if err := os.WriteFile(filepath.Join(dir, "templates", "notes.yaml"), []byte(wrapper), 0o600); err != nil {
		t.Fatal(err)
	}
	notes := func(values string) string {
		t.Helper()
		out, errOut, err := helm(t, "template", "baton", dir, "--show-only", "templates/notes.yaml", "-f", valuesFile(t, values))
		if err != nil {
			t.Fatalf("helm template: %v\n%s", err, errOut)
		}
		var n struct{ Text string }
		if err := yaml.Unmarshal([]byte(out), &n); err != nil {
			t.Fatal(err)
		}
		return n.Text
	}
	off := notes("")
	for _, want := range []string{"baton/DATABASE_URL", "baton/REDIS_URL", "baton/OPENAI_API_KEY", "Bash tool is off", "worker.sandbox.enabled=true"} {
		if !strings.Contains(off, want) {
			t.Errorf("the notes lack %q:\n%s", want, off)
		}
	}
	on := notes("config: {slack: {enabled: true, mode: http}}\nworker: {sandbox: {enabled: true}}\nsecrets: {existingSecret: creds}")
	for _, want := range []string{"creds/SLACK_BOT_TOKEN", "creds/SLACK_SIGNING_SECRET", "/slack/events", "runs in bubblewrap"} {
		if !strings.Contains(on, want) {
			t.Errorf("the notes lack %q:\n%s", want, on)
		}
	}
	if none := notes("config: {tools: {bash: {sandbox: none}}}"); !strings.Contains(none, "runs unsandboxed") || strings.Contains(none, "Bash tool is off") {
		t.Errorf("with tools.bash.sandbox none the notes do not say Bash runs unsandboxed:\n%s", none)
	}
	if strings.Contains(on, "SLACK_APP_TOKEN") {
		t.Errorf("the notes ask for the app-level token in http mode:\n%s", on)
	}
}
