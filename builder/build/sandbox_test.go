package build_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

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
	b := newBuilder(t, func(o *build.Options) { o.Sandbox = m })
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
	b := newBuilder(t, func(o *build.Options) { o.Sandbox = m })
	res, _, err := buildRepo(t, b, map[string]string{"go.mod": goMod, "main.go": goMain}, nil)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	if body := serveApp(t, res, "web"); body != "hello from go" {
		t.Errorf("GET / = %q, want %q", body, "hello from go")
	}
	if _, err := os.Stat(filepath.Join(cacheDir, "tenants", "acme", "go-build")); err != nil {
		t.Errorf("the tenant's Go build cache: %v", err)
	}
}
