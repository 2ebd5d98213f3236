package gitserver

import (
	"context"
	"crypto/rand"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// repoQuota is a Quota whose limits the test sets per tenant.
type repoQuota struct {
	mu     sync.Mutex
	limits map[string]int64
}

func (q *repoQuota) RepoBytes(_ context.Context, tenant string) (int64, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.limits[tenant], nil
}

func (q *repoQuota) set(tenant string, n int64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.limits[tenant] = n
}

// objectFiles lists the files under a repository's objects directory.
func objectFiles(t *testing.T, repoDir string) []string {
	t.Helper()
	var files []string
	_ = filepath.Walk(filepath.Join(repoDir, "objects"), func(path string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			files = append(files, path)
		}
		return nil
	})
	return files
}

// TestRepoQuota: a push whose pack would take the tenant's repositories
// past its quota is refused with a message naming the quota and its value,
// stores nothing and moves no ref; the same push passes once the quota is
// raised. The quota counts every repository of the tenant.
func TestRepoQuota(t *testing.T) {
	quota := &repoQuota{limits: map[string]int64{"acme": 256 << 10, "other": 256 << 10}}
	e := newEnv(t, func(o *Options) { o.Quota = quota })
	dir := e.workTree()
	url := e.remote("http", "web")
	e.mustGit(dir, "push", "-q", url, "main")
	small := e.mustGit(dir, "rev-parse", "HEAD")
	objectsBefore := objectFiles(t, e.srv.RepoDir("acme", "web"))

	big := make([]byte, 512<<10)
	_, _ = rand.Read(big)
	e.commit(dir, "blob.bin", string(big))
	for _, transport := range transports {
		out, err := e.git(dir, "push", e.remote(transport, "web"), "main")
		if err == nil {
			t.Fatalf("%s: a push past the quota succeeded:\n%s", transport, out)
		}
		assertContains(t, out, "remote: Push rejected: the tenant's repoBytes quota (256 KiB) is reached",
			"repoBytes quota of 256 KiB exceeded")
		if got := e.lsRemote(url)["refs/heads/main"]; got != small {
			t.Errorf("%s: server main = %s after a refused push, want %s", transport, got, small)
		}
	}
	if after := objectFiles(t, e.srv.RepoDir("acme", "web")); len(after) != len(objectsBefore) {
		t.Errorf("a refused push stored objects: %d files before, %d after", len(objectsBefore), len(after))
	}
	if n := len(e.deployer.pushes()); n != 1 {
		t.Errorf("Deploy called %d times, want once (the first push)", n)
	}

	// Another app of the same tenant: its repositories count together.
	quota.set("acme", 700<<10)
	e.mustGit(dir, "push", "-q", e.remote("http", "api"), "main")
	out, err := e.git(dir, "push", url, "main")
	if err == nil {
		t.Fatalf("a second copy of the blob under a quota of 700 KiB succeeded:\n%s", out)
	}
	assertContains(t, out, "repoBytes quota (700 KiB) is reached")

	// Raised: the push passes.
	quota.set("acme", 4<<20)
	if out, err := e.git(dir, "push", url, "main"); err != nil {
		t.Fatalf("push under a quota of 4 MiB: %v\n%s", err, out)
	}
	if got, want := e.lsRemote(url)["refs/heads/main"], e.mustGit(dir, "rev-parse", "HEAD"); got != want {
		t.Errorf("server main = %s, want %s", got, want)
	}
}

// TestRefusedDeployRejectsPush: a Deployer that refuses a push (a quota)
// gets "Push rejected" and its reason on the pusher's terminal, not "Build
// failed", and the branch stays.
func TestRefusedDeployRejectsPush(t *testing.T) {
	e := newEnv(t)
	dir := e.workTree()
	url := e.remote("http", "web")
	e.mustGit(dir, "push", "-q", url, "main")
	good := e.mustGit(dir, "rev-parse", "HEAD")
	e.deployer.set(func(context.Context, Push, io.Writer) (DeployResult, error) {
		return DeployResult{}, &RefusedError{Reason: errors.New("the tenant's concurrentBuilds quota (1) is reached: 1 of its builds is running")}
	})
	e.commit(dir, "main.go", "package main\n\nfunc main() { println() }\n")
	out, err := e.git(dir, "push", url, "main")
	if err == nil {
		t.Fatalf("a refused push succeeded:\n%s", out)
	}
	assertContains(t, out, "remote: Push rejected: the tenant's concurrentBuilds quota (1) is reached: 1 of its builds is running",
		"! [remote rejected] main -> main (push rejected)")
	if got := e.lsRemote(url)["refs/heads/main"]; got != good {
		t.Errorf("server main = %s after a refused push, want %s", got, good)
	}
}
