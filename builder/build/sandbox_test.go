package build_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"bex.co/bex/builder/build"
	"bex.co/bex/internal/sandbox"
	"bex.co/bex/internal/sandbox/sandboxtest"
)

// attackJS is a build script written to attack the builder: it reads a
// secret of the platform, plants a file outside the build, and dials the
// platform registry, then builds as asked.
const attackJS = `
const fs = require('fs'), net = require('net');
try { console.log('read: ok ' + fs.readFileSync(process.argv[2], 'utf8')); } catch (e) { console.log('read: denied ' + e.code); }
try { fs.writeFileSync(process.argv[3], 'planted'); console.log('write: ok'); } catch (e) { console.log('write: denied ' + e.code); }
console.log('uid: ' + process.getuid());
fs.mkdirSync('dist', { recursive: true });
fs.writeFileSync('dist/index.html', 'built');
const [host, port] = process.argv[4].split(':');
const s = net.connect({ host, port: Number(port), timeout: 2000 });
s.on('connect', () => { console.log('registry: ok'); s.destroy(); });
s.on('timeout', () => { console.log('registry: denied timeout'); s.destroy(); });
s.on('error', (e) => console.log('registry: denied ' + e.code));
`

// Build steps are tenant code: in the sandbox, npm run build sees neither
// the platform's files nor its loopback services, and cannot write outside
// the build. Without the sandbox the same script reads the secret.
func TestBuildStepsRunInTheSandbox(t *testing.T) {
	m := sandboxtest.New(t, sandbox.Options{StateDir: t.TempDir()})
	b := newBuilder(t, func(o *build.Options) { o.Sandbox = m; o.CacheDir = sandboxCacheDir })
	secret := filepath.Join(t.TempDir(), "operator-token")
	if err := os.WriteFile(secret, []byte("s3cr3t-build-token"), 0o644); err != nil {
		t.Fatal(err)
	}
	planted := filepath.Join(t.TempDir(), "planted")
	files := map[string]string{
		"package.json": `{"name":"attack","version":"1.0.0","main":"server.js","scripts":{"build":"node attack.js ` + secret + ` ` + planted + ` ` + registryAddr + `"}}`,
		"attack.js":    attackJS,
		"server.js":    `require('http').createServer((q, r) => r.end('ok')).listen(process.env.PORT);`,
	}
	res, log, err := buildRepo(t, b, files, nil)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	if strings.Contains(log, "s3cr3t") {
		t.Fatalf("a build step read the platform's secret:\n%s", log)
	}
	for _, want := range []string{"read: denied", "write: denied", "registry: denied", "uid: 1000"} {
		if !strings.Contains(log, want) {
			t.Errorf("build log lacks %q", want)
		}
	}
	if _, err := os.Stat(planted); err == nil {
		t.Errorf("a build step planted %s outside the build", planted)
	}
	dir := filepath.Join(t.TempDir(), "release")
	if _, err := build.Unpack(t.Context(), res.Image, dir, b.Keychain()); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(dir, "dist", "index.html")); err != nil || string(got) != "built" {
		t.Errorf("the sandboxed build's output is not in the image: %q %v", got, err)
	}
}

// A Go app builds in the sandbox with the tenant's own caches, and runs.
func TestGoAppBuildsInTheSandbox(t *testing.T) {
	m := sandboxtest.New(t, sandbox.Options{StateDir: t.TempDir()})
	b := newBuilder(t, func(o *build.Options) { o.Sandbox = m; o.CacheDir = sandboxCacheDir })
	res, _, err := buildRepo(t, b, map[string]string{"go.mod": goMod, "main.go": goMain}, nil)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	if body := serveApp(t, res, "web"); body != "hello from go" {
		t.Errorf("GET / = %q, want %q", body, "hello from go")
	}
	// The cache is the tenant's disk image, unmounted after the build:
	// debugfs reads it as it is.
	image := filepath.Join(sandboxCacheDir, "disks", "acme.ext4")
	if out, err := exec.Command("debugfs", "-R", "stat /go-build", image).CombinedOutput(); err != nil || strings.Contains(string(out), "not found") {
		t.Errorf("the tenant's Go build cache is not in its image %s: %v\n%s", image, err, out)
	}
}

// cpuStat is what a container's cgroup says of its CPU: its quota
// ("quota period", or "max period" without one), how many periods the
// quota was accounted over (none without a quota), and in how many of
// them the kernel throttled it.
type cpuStat struct {
	quota              string
	periods, throttled int64
}

// cpuCgroup reads the cgroup of the running container of the sandbox
// whose bridge is bridge; ok is false while none runs.
func cpuCgroup(bridge string) (st cpuStat, ok bool) {
	for _, v := range []struct{ pattern, quotaFile string }{
		{"/sys/fs/cgroup/bex-sandbox/%s-*/cpu.max", "cpu.max"},               // cgroup v2
		{"/sys/fs/cgroup/cpu/bex-sandbox/%s-*/cpu.cfs_quota_us", ""},         // v1
		{"/sys/fs/cgroup/cpu,cpuacct/bex-sandbox/%s-*/cpu.cfs_quota_us", ""}, // v1, joined
	} {
		files, _ := filepath.Glob(fmt.Sprintf(v.pattern, bridge))
		if len(files) == 0 {
			continue
		}
		dir := filepath.Dir(files[0])
		read := func(name string) string {
			b, _ := os.ReadFile(filepath.Join(dir, name))
			return strings.TrimSpace(string(b))
		}
		if v.quotaFile != "" {
			st.quota = read(v.quotaFile)
		} else {
			q := read("cpu.cfs_quota_us")
			if q == "-1" {
				q = "max"
			}
			st.quota = q + " " + read("cpu.cfs_period_us")
		}
		for _, line := range strings.Split(read("cpu.stat"), "\n") {
			k, n, _ := strings.Cut(line, " ")
			switch k {
			case "nr_periods":
				st.periods, _ = strconv.ParseInt(n, 10, 64)
			case "nr_throttled":
				st.throttled, _ = strconv.ParseInt(n, 10, 64)
			}
		}
		return st, true
	}
	return cpuStat{}, false
}

// spin runs a build whose step spins on eight threads until until says
// enough of its cgroup's CPU statistics (or a deadline passes), and
// returns the last statistics read.
func spin(t *testing.T, limits sandbox.Limits, until func(cpuStat) bool) cpuStat {
	t.Helper()
	m := sandboxtest.New(t, sandbox.Options{StateDir: t.TempDir()})
	caches := t.TempDir()
	b := newBuilder(t, func(o *build.Options) {
		o.Sandbox = m
		o.SandboxLimits = limits
		o.CacheDir = caches
		o.Timeout = 5 * time.Minute
	})
	stop := filepath.Join(caches, "tenants", "acme", "stop")
	repo, commit := gitRepo(t, map[string]string{"index.html": "hi\n"})
	req := build.Request{Tenant: "acme", App: "spin", RepoDir: repo, Commit: commit,
		Command: "echo spinning; for i in 1 2 3 4 5 6 7 8; do (while [ ! -e " + stop + " ]; do :; done) & done; wait; echo stopped"}
	// The cgroup's limits are set before the step starts: once it has
	// said so, they can be read.
	log, errc := startBuild(t, b, req, "spinning\n")
	st, ok := cpuCgroup(m.Bridge())
	if !ok {
		t.Errorf("the build step's cgroup is not there")
	}
	for deadline := time.Now().Add(3 * time.Minute); ok && !until(st) && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond) // polling with a deadline
		st, ok = cpuCgroup(m.Bridge())
	}
	if err := os.WriteFile(stop, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("Build: %v\n%s", err, log.String())
	}
	t.Logf("cpu quota %q, %d periods, throttled in %d", st.quota, st.periods, st.throttled)
	return st
}

// A build step is held to one CPU by default: its cgroup has a quota of
// 100 ms per 100 ms, which the kernel accounts. (Whether it throttles a
// step at one CPU depends on what else the machine runs.)
func TestBuildStepsHaveACPUQuota(t *testing.T) {
	st := spin(t, sandbox.Limits{}, func(st cpuStat) bool { return st.quota != "100000 100000" || st.periods > 0 })
	if st.quota != "100000 100000" {
		t.Errorf("the build step's CPU quota is %q, want 100000 100000 (1 CPU)", st.quota)
	}
	if st.periods == 0 {
		t.Errorf("the kernel accounted no period of the build step's quota")
	}
}

// A step that spins on eight threads under a small quota (10 ms per
// 100 ms) is throttled.
func TestBuildStepsAreThrottledAtTheirQuota(t *testing.T) {
	st := spin(t, sandbox.Limits{CPUMilli: 100}, func(st cpuStat) bool { return st.throttled > 0 })
	if st.quota != "10000 100000" {
		t.Errorf("the build step's CPU quota is %q, want 10000 100000", st.quota)
	}
	if st.throttled == 0 {
		t.Errorf("eight spinning threads were never throttled under 0.1 CPU")
	}
}
