package main

// No Docker engine runs where the tests run: these tests check what can be
// checked of the Dockerfile and docker-compose.yml without one, and run the
// static binary the image is built around in an empty root.

import (
	"bytes"
	"debug/elf"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

const repoRoot = ".."

// instruction is one Dockerfile instruction, continuation lines joined.
type instruction struct {
	cmd  string // upper case: FROM, RUN, COPY, …
	args string
	line int
}

// stage is one FROM … of a Dockerfile and what follows it.
type stage struct {
	from, name string
	ins        []instruction
}

func (s stage) all(cmd string) []instruction {
	var out []instruction
	for _, in := range s.ins {
		if in.cmd == cmd {
			out = append(out, in)
		}
	}
	return out
}

// parseDockerfile splits a Dockerfile into stages.
func parseDockerfile(t *testing.T, text string) []stage {
	t.Helper()
	var stages []stage
	var cur strings.Builder
	start := 0
	flush := func() {
		s := strings.TrimSpace(cur.String())
		cur.Reset()
		if s == "" {
			return
		}
		cmd, args, _ := strings.Cut(s, " ")
		in := instruction{cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args), line: start}
		if in.cmd == "FROM" {
			f := strings.Fields(in.args)
			st := stage{from: f[0]}
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				st.name = f[2]
			}
			stages = append(stages, st)
			return
		}
		if len(stages) == 0 {
			t.Fatalf("Dockerfile:%d: %s before the first FROM", in.line, in.cmd)
		}
		stages[len(stages)-1].ins = append(stages[len(stages)-1].ins, in)
	}
	for i, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(line)
		if cur.Len() == 0 {
			if trimmed == "" || strings.HasPrefix(trimmed, "#") {
				continue
			}
			start = i + 1
		} else if strings.HasPrefix(trimmed, "#") {
			continue // a comment inside a continued instruction
		}
		if body, ok := strings.CutSuffix(trimmed, `\`); ok {
			cur.WriteString(body + " ")
			continue
		}
		cur.WriteString(trimmed)
		flush()
	}
	flush()
	return stages
}

func TestDockerfile(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(repoRoot, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	stages := parseDockerfile(t, string(data))
	if len(stages) < 2 {
		t.Fatalf("%d stages: want a multi-stage build", len(stages))
	}
	build, runtime := stages[0], stages[len(stages)-1]
	if build.name == "" {
		t.Fatalf("the build stage (FROM %s) has no name for COPY --from", build.from)
	}
	if !strings.HasPrefix(build.from, "golang:") {
		t.Errorf("build stage FROM %s: want a golang image", build.from)
	}

	t.Run("static build", func(t *testing.T) {
		for _, in := range build.all("RUN") {
			if strings.Contains(in.args, "go build") {
				if !strings.Contains(in.args, "CGO_ENABLED=0") || !strings.Contains(in.args, "./bot") {
					t.Errorf("Dockerfile:%d: %s: want CGO_ENABLED=0 go build … ./bot", in.line, in.args)
				}
				return
			}
		}
		t.Error("the build stage runs no go build")
	})

	t.Run("runtime packages", func(t *testing.T) {
		var installed []string
		for _, in := range runtime.all("RUN") {
			if _, after, ok := strings.Cut(in.args, "apt-get install"); ok {
				installed = append(installed, strings.Fields(strings.Split(after, "&&")[0])...)
			}
		}
		for _, pkg := range []string{"bash", "git", "coreutils", "ca-certificates", "bubblewrap", "curl"} {
			if !slices.Contains(installed, pkg) {
				t.Errorf("the runtime stage does not install %s (installs %v)", pkg, installed)
			}
		}
	})

	t.Run("non-root user", func(t *testing.T) {
		users := runtime.all("USER")
		if len(users) == 0 {
			t.Fatal("the runtime stage has no USER: it would run as root")
		}
		if u := strings.Fields(users[len(users)-1].args)[0]; u == "root" || u == "0" || strings.HasPrefix(u, "0:") || strings.HasPrefix(u, "root:") {
			t.Errorf("USER %s: want a non-root user", u)
		}
	})

	t.Run("copies", func(t *testing.T) {
		ignored := dockerignore(t)
		var binary, configs bool
		for _, st := range stages {
			for _, in := range st.all("COPY") {
				f := strings.Fields(in.args)
				var srcs []string
				from := false
				for _, a := range f[:len(f)-1] {
					switch {
					case strings.HasPrefix(a, "--from="):
						from = true
					case strings.HasPrefix(a, "--"):
					default:
						srcs = append(srcs, a)
					}
				}
				if from {
					if st.name != build.name && strings.Contains(in.args, "--from="+build.name) && strings.Contains(in.args, "baton") {
						binary = true
					}
					continue
				}
				for _, src := range srcs {
					if _, err := os.Stat(filepath.Join(repoRoot, src)); err != nil {
						t.Errorf("Dockerfile:%d: COPY %s: not in the repository: %v", in.line, src, err)
					}
					if pat := ignoredBy(ignored, src); pat != "" {
						t.Errorf("Dockerfile:%d: COPY %s, which .dockerignore excludes (%s)", in.line, src, pat)
					}
					if st.name != build.name && strings.TrimSuffix(src, "/") == "configs" {
						configs = true
					}
				}
			}
		}
		if !binary {
			t.Errorf("the runtime stage does not copy the baton binary from the %s stage", build.name)
		}
		if !configs {
			t.Error("the runtime stage does not copy configs/")
		}
	})

	t.Run("healthcheck", func(t *testing.T) {
		hc := runtime.all("HEALTHCHECK")
		if len(hc) == 0 {
			t.Fatal("no HEALTHCHECK")
		}
		args := hc[len(hc)-1].args
		_, port, err := net.SplitHostPort(DefaultConfig().HTTP.Addr)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(args, "/healthz") || !strings.Contains(args, "/"+port) {
			t.Errorf("HEALTHCHECK %s: want /healthz on the default http.addr port %s", args, port)
		}
	})

	t.Run("entrypoint and data", func(t *testing.T) {
		ep := runtime.all("ENTRYPOINT")
		if len(ep) == 0 || !strings.Contains(ep[len(ep)-1].args, "baton") {
			t.Errorf("ENTRYPOINT %v: want baton", ep)
		}
		if got := dataVolume(t, runtime); got != composeDataMount(t) {
			t.Errorf("the image keeps data_dir in %s but docker-compose.yml mounts its volume on %s", got, composeDataMount(t))
		}
	})
}

// dataVolume is where the image's default data_dir lands: WORKDIR joined
// with the default data_dir, which must also be a VOLUME.
func dataVolume(t *testing.T, runtime stage) string {
	t.Helper()
	wd := runtime.all("WORKDIR")
	if len(wd) == 0 {
		t.Fatal("the runtime stage has no WORKDIR: relative paths in the config would resolve against /")
	}
	dir := filepath.Join(wd[len(wd)-1].args, DefaultConfig().DataDir)
	var vols []string
	for _, in := range runtime.all("VOLUME") {
		vols = append(vols, strings.Fields(strings.NewReplacer("[", " ", "]", " ", `"`, " ", ",", " ").Replace(in.args))...)
	}
	if !slices.Contains(vols, dir) {
		t.Errorf("data_dir %s is not a VOLUME (volumes: %v)", dir, vols)
	}
	return dir
}

// dockerignore returns the patterns of .dockerignore.
func dockerignore(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, ".dockerignore"))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var pats []string
	for _, l := range strings.Split(string(data), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			pats = append(pats, strings.TrimPrefix(l, "/"))
		}
	}
	return pats
}

// ignoredBy returns the pattern that excludes src, or "".
func ignoredBy(pats []string, src string) string {
	src = strings.TrimSuffix(src, "/")
	if src == "." {
		return ""
	}
	for _, p := range pats {
		if ok, _ := filepath.Match(p, src); ok {
			return p
		}
	}
	return ""
}

// compose is the part of docker-compose.yml the tests read.
type compose struct {
	Services map[string]struct {
		Image       string         `yaml:"image"`
		Build       any            `yaml:"build"`
		Command     any            `yaml:"command"`
		EnvFile     any            `yaml:"env_file"`
		Environment map[string]any `yaml:"environment"`
		Volumes     []string       `yaml:"volumes"`
		DependsOn   map[string]struct {
			Condition string
			Required  *bool
		} `yaml:"depends_on"`
		Profiles        []string            `yaml:"profiles"`
		Healthcheck     *struct{ Test any } `yaml:"healthcheck"`
		StopGracePeriod string              `yaml:"stop_grace_period"`
	} `yaml:"services"`
	Volumes map[string]any `yaml:"volumes"`
}

func readCompose(t *testing.T) compose {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var c compose
	if err := yaml.Unmarshal(data, &c); err != nil {
		t.Fatalf("docker-compose.yml does not parse: %v", err)
	}
	return c
}

// words flattens a compose command or test (a string or a list).
func words(v any) []string {
	switch v := v.(type) {
	case string:
		return strings.Fields(v)
	case []any:
		var out []string
		for _, w := range v {
			out = append(out, strings.Fields(fmt.Sprint(w))...)
		}
		return out
	}
	return nil
}

// composeDataMount is where docker-compose.yml mounts baton's named data volume.
func composeDataMount(t *testing.T) string {
	t.Helper()
	c := readCompose(t)
	for _, v := range c.Services["baton"].Volumes {
		src, dst, ok := strings.Cut(v, ":")
		if _, named := c.Volumes[src]; ok && named {
			dst, _, _ = strings.Cut(dst, ":")
			return dst
		}
	}
	return ""
}

func TestCompose(t *testing.T) {
	c := readCompose(t)
	baton, ok := c.Services["baton"]
	if !ok {
		t.Fatalf("no baton service (services: %v)", slices.Sorted(maps.Keys(c.Services)))
	}
	redis, ok := c.Services["redis"]
	if !ok {
		t.Fatal("no redis service")
	}
	if baton.Build == nil && baton.Image == "" {
		t.Error("the baton service has neither build nor image")
	}
	if !strings.HasPrefix(redis.Image, "redis:7") {
		t.Errorf("redis image %q: want redis:7", redis.Image)
	}
	cmd := strings.Join(words(redis.Command), " ")
	for _, want := range []string{"--appendonly yes", "--appendfsync everysec", "--maxmemory-policy noeviction"} {
		if !strings.Contains(cmd, want) {
			t.Errorf("redis command %q lacks %s", cmd, want)
		}
	}
	if len(redis.Volumes) == 0 {
		t.Error("redis keeps its AOF on no volume")
	}
	if url, _ := baton.Environment["REDIS_URL"].(string); !strings.Contains(url, "redis://redis:") {
		t.Errorf("baton's REDIS_URL %q does not point at the redis service", url)
	}
	if baton.EnvFile == nil {
		t.Error("the baton service reads no env_file for its secrets")
	}
	if composeDataMount(t) == "" {
		t.Errorf("the baton service mounts no named volume (volumes: %v)", baton.Volumes)
	}
	if redis.Healthcheck == nil || !slices.Contains(words(redis.Healthcheck.Test), "ping") {
		t.Error("the redis service has no healthcheck (redis-cli ping)")
	}
	if baton.DependsOn["redis"].Condition != "service_healthy" {
		t.Errorf("baton depends on redis with condition %q, want service_healthy", baton.DependsOn["redis"].Condition)
	}
	grace, err := time.ParseDuration(baton.StopGracePeriod)
	if err != nil {
		t.Fatalf("baton's stop_grace_period %q: %v", baton.StopGracePeriod, err)
	}
	if grace <= DefaultConfig().Workers.ShutdownGrace {
		t.Errorf("stop_grace_period %v does not outlast workers.shutdown_grace %v: Docker would kill running jobs", grace, DefaultConfig().Workers.ShutdownGrace)
	}
	// PostgreSQL comes with its profile only, healthy before Baton starts,
	// its data on a volume.
	pg, ok := c.Services["postgres"]
	if !ok || !slices.Contains(pg.Profiles, "postgres") || len(pg.Volumes) == 0 {
		t.Errorf("postgres service %+v: want one under the postgres profile with a volume", pg)
	}
	if pg.Healthcheck == nil || !slices.Contains(words(pg.Healthcheck.Test), "pg_isready") {
		t.Error("the postgres service has no healthcheck (pg_isready)")
	}
	if d := baton.DependsOn["postgres"]; d.Condition != "service_healthy" || d.Required == nil || *d.Required {
		t.Errorf("baton depends on postgres as %+v, want service_healthy and required: false (the profile is optional)", d)
	}
	// The env file the compose file names is the one .env.example documents.
	if _, err := os.Stat(filepath.Join(repoRoot, ".env.example")); err != nil {
		t.Errorf("no .env.example to copy to the env file: %v", err)
	}
}

// buildStatic builds ./bot as the Dockerfile does, without cgo.
func buildStatic(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the binary; skipped with -short")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is not on PATH: %v", err)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "baton")
	cmd := exec.Command(goBin, "build", "-trimpath", "-o", bin, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("CGO_ENABLED=0 go build ./bot: %v\n%s", err, out)
	}
	return bin
}

// TestStaticBinary: the binary of the image's build is a static ELF (no
// interpreter, no dynamic section, no shared library) and runs in a root
// that holds nothing else: version, help, and migrate on a fresh SQLite
// file (the store is pure Go).
func TestStaticBinary(t *testing.T) {
	bin := buildStatic(t)
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("program header %v: the binary is dynamically linked", p.Type)
		}
	}
	for _, name := range []string{".interp", ".dynamic"} {
		if f.Section(name) != nil {
			t.Errorf("section %s: the binary is dynamically linked", name)
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("the binary needs shared libraries %v", libs)
	}

	root := filepath.Dir(bin) // holds the binary only
	run := emptyRoot(t, root)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"version"}, "baton "},
		{[]string{"help"}, "Usage: baton"},
		{[]string{"migrate"}, "is up to date"},
	} {
		out, err := run(tc.args...)
		if err != nil || !strings.Contains(out, tc.want) {
			t.Errorf("baton %s in an empty root: %v\n%s", strings.Join(tc.args, " "), err, out)
		}
	}
	if _, err := os.Stat(filepath.Join(root, "data", "baton.db")); err != nil {
		t.Errorf("migrate in the empty root left no store: %v", err)
	}
}

// emptyRoot returns a function that runs /baton args… with root as /, by
// bubblewrap or unshare, whichever works here. It skips t when neither
// does, unless BATON_REQUIRE_BWRAP=1.
func emptyRoot(t *testing.T, root string) func(args ...string) (string, error) {
	t.Helper()
	env := []string{"BATON_DATA_DIR=/data", "PATH=/"}
	var why []string
	if bw, err := exec.LookPath("bwrap"); err == nil {
		run := func(args ...string) (string, error) {
			a := []string{"--bind", root, "/", "--clearenv"}
			for _, kv := range env {
				k, v, _ := strings.Cut(kv, "=")
				a = append(a, "--setenv", k, v)
			}
			a = append(append(a, "--", "/baton"), args...)
			return combined(exec.Command(bw, a...))
		}
		if out, err := run("version"); err == nil {
			return run
		} else {
			why = append(why, fmt.Sprintf("bwrap: %v: %s", err, out))
		}
	} else {
		why = append(why, "bwrap is not on PATH")
	}
	if us, err := exec.LookPath("unshare"); err == nil {
		run := func(args ...string) (string, error) {
			cmd := exec.Command(us, append([]string{"--map-root-user", "--root", root, "/baton"}, args...)...)
			cmd.Env = env
			return combined(cmd)
		}
		if out, err := run("version"); err == nil {
			return run
		} else {
			why = append(why, fmt.Sprintf("unshare: %v: %s", err, out))
		}
	} else {
		why = append(why, "unshare is not on PATH")
	}
	msg := "no way to run a process in an empty root here: " + strings.Join(why, "; ")
	if os.Getenv("BATON_REQUIRE_BWRAP") == "1" {
		t.Fatal(msg + " (BATON_REQUIRE_BWRAP=1)")
	}
	t.Skip(msg + " (set BATON_REQUIRE_BWRAP=1 to fail instead)")
	return nil
}

func combined(cmd *exec.Cmd) (string, error) {
	var b bytes.Buffer
	cmd.Stdout, cmd.Stderr = &b, &b
	err := cmd.Run()
	return b.String(), err
}

// TestBashWithoutUserNamespaces runs the static binary where user
// namespaces are refused, as in a container under Docker's default
// security profile: with tools.bash.sandbox auto Baton starts with the Bash
// tool disabled and says why; with bwrap it refuses to start, naming the key.
func TestBashWithoutUserNamespaces(t *testing.T) {
	bw, err := exec.LookPath("bwrap")
	if err != nil {
		if os.Getenv("BATON_REQUIRE_BWRAP") == "1" {
			t.Fatal("bwrap is not on PATH (BATON_REQUIRE_BWRAP=1)")
		}
		t.Skip("bwrap is not on PATH (set BATON_REQUIRE_BWRAP=1 to fail instead)")
	}
	if help, _ := combined(exec.Command(bw, "--help")); !strings.Contains(help, "--disable-userns") {
		t.Skip("this bubblewrap has no --disable-userns (0.8 or later) to refuse user namespaces with")
	}
	bin := buildStatic(t)
	dir := filepath.Dir(bin)
	for name, sandbox := range map[string]string{"auto.yaml": "auto", "bwrap.yaml": "bwrap"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("tools:\n  bash:\n    sandbox: "+sandbox+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run := func(config string) (string, error) {
		args := []string{"--ro-bind", "/usr", "/usr"}
		for _, d := range []string{"/bin", "/sbin", "/lib", "/lib64", "/etc"} {
			args = append(args, "--ro-bind-try", d, d)
		}
		args = append(args, "--ro-bind", dir, "/baton", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp",
			"--unshare-user", "--disable-userns", "--chdir", "/tmp")
		if os.Getuid() == 0 {
			args = append(args, "--cap-drop", "ALL")
		}
		args = append(args, "--", "/baton/baton", "pieces", "list", "--config", "/baton/"+config)
		return combined(exec.Command(bw, args...))
	}
	if out, err := run("auto.yaml"); err != nil || !strings.Contains(out, "Bash disabled") || !strings.Contains(out, "chat") {
		t.Errorf("sandbox auto without user namespaces: %v, want the pieces listed and Bash disabled:\n%s", err, out)
	}
	if out, err := run("bwrap.yaml"); err == nil || !strings.Contains(out, "tools.bash.sandbox") {
		t.Errorf("sandbox bwrap without user namespaces: %v, want a refusal naming tools.bash.sandbox:\n%s", err, out)
	}
}
