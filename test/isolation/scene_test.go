package isolation_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"bex.co/bex/internal/sandbox"
	"bex.co/bex/test/platformtest"
)

// The tenants and apps of the suite: "dev" is the platform's first tenant
// (its token is BEX_TOKEN) and attacks; "other" is created by the operator
// and is attacked.
const (
	attacker   = "dev"
	attackApp  = "attack"
	victim     = "other"
	victimApp  = "victim"
	secretName = "VICTIM_SECRET"
)

// scene is a running platform with the attacker's and the victim's apps
// live.
type scene struct {
	ctx    context.Context
	bin    string
	state  string
	p      *platformtest.Platform
	env    map[string]string
	apps   *http.Client
	a, b   *tenant
	secret string // the victim's secret env value
	// sandboxed: the platform runs tenant code in sandboxes (no
	// --unsafe-no-sandbox).
	sandboxed bool
}

// tenant is a user of the platform: the bex CLI and git with its token.
type tenant struct {
	s     *scene
	name  string
	token string
	home  string
}

// start starts the platform of bin with flags, creates the victim tenant,
// and pushes testdata/victim as the victim and testdata/attack as the
// attacker.
func start(ctx context.Context, t *testing.T, bin string, flags ...string) *scene {
	t.Helper()
	began := time.Now()
	s := &scene{ctx: ctx, bin: bin, sandboxed: !slices.Contains(flags, "--unsafe-no-sandbox")}
	s.state = t.TempDir()
	// The private Postgres runs as the postgres user when root: it must
	// reach its data directory under the state directory.
	for _, d := range []string{s.state, filepath.Dir(s.state)} {
		must(t, os.Chmod(d, 0o711))
	}
	flags = append(flags, buildDiskFlags()...)
	s.p = platformtest.Start(ctx, t, s.bin, s.state, "", flags...)
	s.env = s.p.WaitEnv(ctx, t)
	t.Logf("platform ready in %s", time.Since(began).Round(time.Second))
	s.apps = platformtest.AppClient(t, s.env)
	s.a = &tenant{s: s, name: attacker, token: s.env["BEX_TOKEN"], home: t.TempDir()}

	op := &tenant{s: s, token: s.env["BEX_OPERATOR_TOKEN"], home: t.TempDir()}
	var created struct {
		Token string `json:"token"`
	}
	must(t, json.Unmarshal([]byte(op.mustBex(t, "admin", "tenant", "create", victim, "-o", "json")), &created))
	if created.Token == "" {
		t.Fatal("bex admin tenant create printed no token")
	}
	s.b = &tenant{s: s, name: victim, token: created.Token, home: t.TempDir()}

	s.secret = "victim-secret-" + strconv.FormatInt(int64(os.Getpid()), 36) + "-" + filepath.Base(s.state)
	s.b.mustBex(t, "apps", "create", victimApp)
	s.b.mustBex(t, "env", "set", "--secret", victimApp, secretName+"="+s.secret)
	s.b.push(t, victimApp, repo(t, "victim"))
	s.a.mustBex(t, "apps", "create", attackApp)
	s.a.push(t, attackApp, repo(t, "attack"))
	t.Logf("both apps live in %s", time.Since(began).Round(time.Second))
	return s
}

func (u *tenant) bex(args ...string) (string, error) {
	return u.bexIn("", args...)
}

// bexIn runs the bex CLI as the tenant with stdin, and returns its
// output, stdout and stderr together.
func (u *tenant) bexIn(stdin string, args ...string) (string, error) {
	cmd := exec.CommandContext(u.s.ctx, filepath.Join(u.s.bin, "bex"), args...)
	cmd.Env = append(os.Environ(), "BEX_API="+u.s.env["BEX_API"], "BEX_TOKEN="+u.token, "XDG_CONFIG_HOME="+u.home, "HOME="+u.home)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (u *tenant) mustBex(t *testing.T, args ...string) string {
	t.Helper()
	out, err := u.bex(args...)
	if err != nil {
		t.Fatalf("bex %s (as %s): %v\n%s", strings.Join(args, " "), u.name, err, out)
	}
	return out
}

// tryPush pushes repo's main to app over HTTP with the tenant's token.
func (u *tenant) tryPush(app, repo string) (string, error) {
	remote, err := url.Parse(u.s.env["BEX_GIT"])
	if err != nil {
		return "", err
	}
	remote.User = url.UserPassword("bex", u.token)
	return platformtest.GitErr(repo, "push", remote.String()+"/"+u.name+"/"+app+".git", "main")
}

func (u *tenant) push(t *testing.T, app, repo string) {
	t.Helper()
	out, err := u.tryPush(app, repo)
	if err != nil || !strings.Contains(out, "Released v1") {
		t.Fatalf("pushing %s/%s: %v\n%s", u.name, app, err, out)
	}
}

// host is the default hostname of one of the tenant's apps.
func (u *tenant) host(app string) string {
	return app + "-" + u.name + "." + strings.Split(u.s.env["BEX_DOMAIN"], ":")[0]
}

// call sends a request to one of the tenant's apps through the edge.
func (u *tenant) call(app, method, path string, body any) (int, []byte, error) {
	var in io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		in = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(u.s.ctx, method, "https://"+u.host(app)+path, in)
	if err != nil {
		return 0, nil, err
	}
	resp, err := u.s.apps.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// whoami is what an instance of the attack app (/whoami) or the victim's
// app says of itself.
type whoami struct {
	Addr string `json:"addr"`
	Boot string `json:"boot"`
}

func (u *tenant) whoami(app string) (whoami, error) {
	var w whoami
	code, body, err := u.call(app, http.MethodGet, "/whoami", nil)
	if err != nil {
		return w, err
	}
	if code != http.StatusOK {
		return w, fmt.Errorf("GET /whoami: %d %s", code, body)
	}
	return w, json.Unmarshal(body, &w)
}

// repo is a git repository holding the files of testdata/<name>,
// committed on main.
func repo(t *testing.T, name string) string {
	t.Helper()
	dir := t.TempDir()
	copyFiles(t, filepath.Join("testdata", name), dir)
	platformtest.Git(t, dir, "init", "-q", "-b", "main")
	platformtest.Git(t, dir, "add", ".")
	platformtest.Git(t, dir, "commit", "-q", "-m", name)
	return dir
}

// copyFiles copies the files of the directory from into the directory to.
func copyFiles(t *testing.T, from, to string) {
	t.Helper()
	entries, err := os.ReadDir(from)
	must(t, err)
	must(t, os.MkdirAll(to, 0o755))
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(from, e.Name()))
		must(t, err)
		must(t, os.WriteFile(filepath.Join(to, e.Name()), b, 0o644))
	}
}

// result is one attempt of the attack app.
type result struct {
	Attempt string `json:"attempt"`
	Outcome string `json:"outcome"`
	Detail  string `json:"detail"`
}

// attack runs one group of the attack app's attempts with the plan and
// requireBlocked fails the test for each attempt of rs that was not
// blocked, or blocked with no reason recorded; what names the attacker in
// the message ("attack from the build").
func requireBlocked(t *testing.T, what string, rs []result) {
	t.Helper()
	for _, r := range rs {
		if r.Outcome != "blocked" {
			t.Errorf("%s got through: %s: %s", what, r.Attempt, r.Detail)
		} else if r.Detail == "" {
			t.Errorf("%s was blocked with no reason recorded", r.Attempt)
		}
	}
}

// logs each outcome.
func (s *scene) attack(t *testing.T, group string, p plan) []result {
	t.Helper()
	code, body, err := s.a.call(attackApp, http.MethodPost, "/attack/"+group, p)
	if err != nil || code != http.StatusOK {
		t.Fatalf("POST /attack/%s: %d %v\n%s", group, code, err, body)
	}
	var rs []result
	if err := json.Unmarshal(body, &rs); err != nil {
		t.Fatalf("POST /attack/%s answered %q: %v", group, body, err)
	}
	for _, r := range rs {
		t.Logf("%-7s %s: %s", r.Outcome, r.Attempt, r.Detail)
	}
	return rs
}

// plan is what the attack app is told; see testdata/attack.
type plan struct {
	Files            []target  `json:"files"`
	HostPIDNamespace string    `json:"hostPIDNamespace"`
	Markers          []string  `json:"markers"`
	Services         []service `json:"services"`
	Addresses        []target  `json:"addresses"`
	Peer             string    `json:"peer"`
	SweepPorts       []int     `json:"sweepPorts"`
	Exhaust          sizes     `json:"exhaust"`
	Groups           []string  `json:"groups"`
}

type target struct {
	Name string `json:"name"`
	Path string `json:"path"`
	// Holds, for a directory, is a name the real one holds.
	Holds string `json:"holds,omitempty"`
}

// sizes are the exhaust group's attempts (the app's when zero); see
// testdata/attack.
type sizes struct {
	MemoryMiB int      `json:"memoryMiB,omitempty"`
	Processes int      `json:"processes,omitempty"`
	Files     int      `json:"files,omitempty"`
	FillMiB   int      `json:"fillMiB,omitempty"`
	Fill      []target `json:"fill,omitempty"`
}

type service struct {
	Name string `json:"name"`
	Port int    `json:"port"`
	URL  string `json:"url"`
}

// plan gathers what the test knows of the platform: its files, its ports,
// the machine's addresses and listening ports, the victim's instance.
func (s *scene) plan(t *testing.T) plan {
	t.Helper()
	state := func(rel ...string) string { return filepath.Join(append([]string{s.state}, rel...)...) }
	p := plan{
		Files: []target{
			// A build's sandbox has a directory at this path, the parents of
			// its work directory's mount point: the real one holds the
			// operator token.
			{Name: "the state directory", Path: state(), Holds: "operator-token"},
			{Name: "the operator token", Path: state("operator-token")},
			{Name: "the dev tenant's token", Path: state("dev-token")},
			{Name: "the env file", Path: state("env")},
			{Name: "the edge CA's key", Path: state("ca", "ca.key")},
			{Name: "the registry token", Path: state("registry-token")},
			{Name: "the Postgres password", Path: state("postgres.password")},
			{Name: "etcd's CA key", Path: state("controlplane", "pki", "etcd-ca.key")},
			{Name: "etcd's client key", Path: state("controlplane", "pki", "etcd-client.key")},
			{Name: "the SSH host key", Path: state("ssh_host_ed25519_key")},
			{Name: "the victim's releases", Path: state("releases", victim)},
			{Name: "the victim's release", Path: state("releases", victim, victimApp, "v1")},
			{Name: "the victim's git repository", Path: state("git", victim)},
		},
		Markers: []string{s.secret},
	}
	ns, err := os.Readlink("/proc/self/ns/pid")
	must(t, err)
	p.HostPIDNamespace = ns

	var ports struct {
		Ports map[string]int `json:"ports"`
	}
	readJSON(t, state("ports.json"), &ports)
	urls := map[string]string{
		"registry": "http://%s/v2/", "edge": "http://%s/", "edge-https": "https://%s/",
		"git-http": "http://%s/" + victim + "/" + victimApp + ".git/info/refs?service=git-upload-pack",
		"api":      "http://%s/api/v1/admin/tenants",
	}
	for name, port := range ports.Ports {
		p.Services = append(p.Services, service{Name: "the platform's " + name, Port: port, URL: urls[name]})
	}
	var cp struct {
		EtcdClientPort int            `json:"etcdClientPort"`
		EtcdPeerPort   int            `json:"etcdPeerPort"`
		Ports          map[string]int `json:"ports"`
	}
	readJSON(t, state("controlplane", "state.json"), &cp)
	p.Services = append(p.Services,
		service{Name: "etcd (client)", Port: cp.EtcdClientPort, URL: "https://%s/health"},
		service{Name: "etcd (peer)", Port: cp.EtcdPeerPort})
	for name, port := range cp.Ports {
		p.Services = append(p.Services, service{Name: "kube-apiserver " + name, Port: port, URL: "https://%s/api"})
	}
	pgPort, err := os.ReadFile(state("postgres.port"))
	must(t, err)
	port, err := strconv.Atoi(strings.TrimSpace(string(pgPort)))
	must(t, err)
	p.Services = append(p.Services, service{Name: "the private Postgres", Port: port})

	// The machine's own addresses (IPv4 and IPv6), and the apiserver's
	// loopback address. Not the bridges of other platforms on this
	// machine (test packages run side by side): they come and go, and
	// once one is gone its address lies beyond the machine, where builds
	// may connect and where this machine's upstream network accepts every
	// connection. While it exists it is a host address like eth0's, which
	// the plan has.
	own := ownBridges(t, s.p.PID())
	if s.sandboxed && len(own) == 0 {
		t.Fatalf("the platform (process %d) holds no sandbox slot lock in %s", s.p.PID(), sandbox.DefaultRunDir)
	}
	ifaces, err := net.Interfaces()
	must(t, err)
	for _, i := range ifaces {
		if strings.HasPrefix(i.Name, "bex-") && !own[i.Name] {
			continue
		}
		addrs, _ := i.Addrs()
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && !n.IP.IsLinkLocalUnicast() {
				p.Addresses = append(p.Addresses, target{Name: i.Name + " address " + n.IP.String(), Path: n.IP.String()})
			}
		}
	}
	if u, err := url.Parse(s.env["BEX_APISERVER"]); err == nil && u.Hostname() != "" {
		p.Addresses = append(p.Addresses, target{Name: "apiserver address " + u.Hostname(), Path: u.Hostname()})
	}
	p.SweepPorts = listeningPorts(t)

	w, err := s.b.whoami(victimApp)
	if err != nil {
		t.Fatalf("the victim's app does not say where it is: %v", err)
	}
	p.Peer = w.Addr
	return p
}

// ownBridges returns the sandbox bridges of the platform process pid: one
// per slot whose lock it holds open in sandbox.DefaultRunDir, which the
// suite's platforms use.
func ownBridges(t *testing.T, pid int) map[string]bool {
	t.Helper()
	fds := filepath.Join("/proc", strconv.Itoa(pid), "fd")
	entries, err := os.ReadDir(fds)
	must(t, err)
	own := map[string]bool{}
	for _, e := range entries {
		target, err := os.Readlink(filepath.Join(fds, e.Name()))
		if err != nil || filepath.Dir(target) != sandbox.DefaultRunDir {
			continue
		}
		var slot int
		if _, err := fmt.Sscanf(filepath.Base(target), "slot-%d.lock", &slot); err == nil {
			own["bex-"+strconv.Itoa(slot)] = true
		}
	}
	return own
}

// listeningPorts is every TCP port listening in the machine's network
// namespace.
func listeningPorts(t *testing.T) []int {
	t.Helper()
	seen := map[int]bool{}
	var ports []int
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			fields := strings.Fields(line)
			if len(fields) < 4 || fields[3] != "0A" { // LISTEN
				continue
			}
			_, hexPort, _ := strings.Cut(fields[1], ":")
			port, err := strconv.ParseInt(hexPort, 16, 32)
			if err == nil && !seen[int(port)] {
				seen[int(port)] = true
				ports = append(ports, int(port))
			}
		}
	}
	return ports
}

// platformAnswers fails t unless the platform API and the victim's app
// answer.
func (s *scene) platformAnswers(t *testing.T) {
	t.Helper()
	resp, err := http.Get(s.env["BEX_API"] + "/api/v1/healthz")
	if err != nil {
		t.Fatalf("the platform API does not answer: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /api/v1/healthz = %s", resp.Status)
	}
	if _, err := s.b.whoami(victimApp); err != nil {
		t.Fatalf("the victim's app does not answer: %v", err)
	}
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	must(t, err)
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("reading %s: %v", path, err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
