package platformtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// WriteNodeApp writes a Node.js app into dir that answers body on every
// path and logs each request's path. buildJS, when not empty, is the source
// of its build step (npm run build runs node build.js).
func WriteNodeApp(t testing.TB, dir, body, buildJS string) {
	t.Helper()
	pkg := `{"name": "app", "version": "1.0.0"}` + "\n"
	files := map[string]string{
		"server.js": fmt.Sprintf(`require("http").createServer((req, res) => { console.log("served", req.url); res.end(%q); }).listen(process.env.PORT);
console.log("listening on", process.env.PORT);
`, body),
	}
	if buildJS != "" {
		pkg = `{"name": "app", "version": "1.0.0", "scripts": {"build": "node build.js"}}` + "\n"
		files["build.js"] = buildJS
	}
	files["package.json"] = pkg
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// Git runs the real git client in dir and fails t when it fails.
func Git(t testing.TB, dir string, args ...string) string {
	t.Helper()
	out, err := GitErr(dir, args...)
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// GitErr runs the real git client in dir, with an author and no prompts.
func GitErr(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_TERMINAL_PROMPT=0", "HOME="+dir,
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// GoAheadBuildJS is a build step for WriteNodeApp that lets a test decide
// when the build ends: it prints "build: waiting for the go-ahead", waits
// until the file gate exists, then prints "build: go-ahead received, <body>
// is ready". A sandboxed build sees no file of the host but its own work
// directory and its tenant's caches: on a platform, put the gate in
// TenantBuildCache.
func GoAheadBuildJS(gate, body string) string {
	return fmt.Sprintf(`const fs = require("fs");
console.log("build: waiting for the go-ahead");
const timer = setInterval(() => {
  if (fs.existsSync(%q)) {
    clearInterval(timer);
    console.log("build: go-ahead received, %s is ready");
  }
}, 100);
`, gate, body)
}

// TenantBuildCache is the tenant's build cache directory of the embedded
// platform with state directory state, which the tenant's sandboxed build
// steps see at the same path (it exists once the tenant's first build
// started).
func TenantBuildCache(state, tenant string) string {
	return filepath.Join(state, "builds", "cache", "tenants", tenant)
}
