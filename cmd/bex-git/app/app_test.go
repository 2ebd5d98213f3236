package app_test

import (
	"context"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
	"bex.co/bex/cmd/internal/cmdtest"
	"bex.co/bex/internal/controlplane/cptest"
	"bex.co/bex/internal/pgtest"
	"bex.co/bex/internal/store"
	"bex.co/bex/test/platformtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestCommandLine: an unknown flag, a missing required one (--registry,
// --run-image), an invalid run image reference, a build Pod without memory
// and a build egress that is no CIDR are refused with exit
// code 2 and a message naming the flag.
func TestCommandLine(t *testing.T) {
	bin := cmdtest.Build(t, "bex-git")
	out, code := cmdtest.Run(t, bin, nil, "--root", "/tmp")
	if code != 2 || !strings.Contains(out, "unknown flag: --root") {
		t.Errorf("unknown flag: exit %d, output:\n%s", code, out)
	}
	out, code = cmdtest.Run(t, bin, []string{"BEX_DATABASE_URL=postgres://x@127.0.0.1:1/x"}, "--app-domain", "apps.example.test")
	if code != 2 || !strings.Contains(out, "--registry is required") {
		t.Errorf("missing --registry: exit %d, output:\n%s", code, out)
	}
	// The kube driver cannot run an image without a run image.
	out, code = cmdtest.Run(t, bin, []string{"BEX_DATABASE_URL=postgres://x@127.0.0.1:1/x"},
		"--app-domain", "apps.example.test", "--registry", "127.0.0.1:5000")
	if code != 2 || !strings.Contains(out, "--run-image is required") {
		t.Errorf("missing --run-image: exit %d, output:\n%s", code, out)
	}
	out, code = cmdtest.Run(t, bin, []string{"BEX_DATABASE_URL=postgres://x@127.0.0.1:1/x"},
		"--app-domain", "apps.example.test", "--registry", "127.0.0.1:5000", "--run-image", "Not A Reference")
	if code != 2 || !strings.Contains(out, `--run-image "Not A Reference"`) {
		t.Errorf("invalid --run-image: exit %d, output:\n%s", code, out)
	}
	out, code = cmdtest.Run(t, bin, []string{"BEX_DATABASE_URL=postgres://x@127.0.0.1:1/x"},
		"--app-domain", "apps.example.test", "--registry", "127.0.0.1:5000", "--run-image", "127.0.0.1:5000/bex/run:1",
		"--build-image", "127.0.0.1:5000/bex/build:1", "--build-memory", "0")
	if code != 2 || !strings.Contains(out, `--build-memory "0"`) {
		t.Errorf("--build-memory 0: exit %d, output:\n%s", code, out)
	}
	out, code = cmdtest.Run(t, bin, []string{"BEX_DATABASE_URL=postgres://x@127.0.0.1:1/x"},
		"--app-domain", "apps.example.test", "--registry", "127.0.0.1:5000", "--run-image", "127.0.0.1:5000/bex/run:1",
		"--build-egress-cidrs", "the internet")
	if code != 2 || !strings.Contains(out, `--build-egress-cidrs: "the internet" is not a CIDR`) {
		t.Errorf("--build-egress-cidrs: exit %d, output:\n%s", code, out)
	}
}

// git runs the system git client in dir.
func git(t *testing.T, dir, home, key string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_TERMINAL_PROMPT=0", "HOME="+home,
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com",
		"GIT_SSH_COMMAND=ssh -i "+key+" -o IdentitiesOnly=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestServesGit runs bex-git against a real kube-apiserver and Postgres and
// talks to it with the git client: ls-remote of an App's repository over
// HTTP with the tenant's token and over SSH with its registered key; a
// push to a branch that does not deploy is stored in --root-dir and listed
// afterwards; a wrong token and an app that does not exist are refused.
func TestServesGit(t *testing.T) {
	bin := cmdtest.Build(t, "bex-git")
	cp := cptest.Start(t)
	// Binaries built and the control plane up, the test itself is quick.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dbURL := pgtest.NewDatabase(t)
	st, err := store.Open(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	kube := platformtest.Client(t, cp.KubeconfigPath())
	token, tenantID := cmdtest.Tenant(ctx, t, st, kube, "acme")
	app := &platformv1alpha1.App{ObjectMeta: metav1.ObjectMeta{Namespace: "acme", Name: "hello"}}
	if err := kube.Create(ctx, app); err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	key := filepath.Join(home, "id_ed25519")
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", key).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v\n%s", err, out)
	}
	pub, err := os.ReadFile(key + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.AddSSHKey(ctx, tenantID, "laptop", string(pub)); err != nil {
		t.Fatal(err)
	}

	root := t.TempDir()
	addrs := cmdtest.Addrs(t, 3)
	httpAddr, sshAddr, ops := addrs[0], addrs[1], addrs[2]
	p := cmdtest.Start(t, bin, []string{"DATABASE_URL=", "BEX_DATABASE_URL=" + dbURL},
		"--kubeconfig", cp.KubeconfigPath(), "--workload-kubeconfig", cp.KubeconfigPath(),
		"--root-dir", root, "--http-listen", httpAddr, "--ssh-listen", sshAddr, "--ops-listen", ops,
		"--work-dir", t.TempDir(), "--registry", "127.0.0.1:5000", "--run-image", "127.0.0.1:5000/bex/run:1",
		"--app-domain", "apps.example.test")
	p.WaitOK(t, 3*time.Minute, "http://"+ops+"/readyz")
	if code, _, err := cmdtest.Get(ctx, "http://"+ops+"/healthz", ""); err != nil || code != 200 {
		t.Errorf("GET /healthz: %d %v", code, err)
	}
	if _, err := os.Stat(filepath.Join(root, "ssh_host_ed25519_key")); err != nil {
		t.Errorf("host key not created in --root-dir: %v", err)
	}
	// The builder compiles Go's standard library for the first Go push
	// in the background, with progress in the log.
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		return strings.Contains(p.Output(), "Go standard library"), nil
	}); err != nil {
		t.Errorf("no progress of the Go build cache's warm-up in the log:\n%s", p.Output())
	}

	remote := func(tok, name string) string {
		return "http://" + url.UserPassword("bex", tok).String() + "@" + httpAddr + "/acme/" + name + ".git"
	}
	sshRemote := "ssh://git@" + sshAddr + "/acme/hello.git"
	for _, r := range []string{remote(token, "hello"), sshRemote} {
		if out, err := git(t, home, home, key, "ls-remote", r); err != nil {
			t.Errorf("git ls-remote %s: %v\n%s", r, err, out)
		}
	}
	if out, err := git(t, home, home, key, "ls-remote", remote("wrong", "hello")); err == nil {
		t.Errorf("git ls-remote with a wrong token succeeded:\n%s", out)
	}
	if out, err := git(t, home, home, key, "ls-remote", remote(token, "nope")); err == nil || !strings.Contains(out, "app nope does not exist") {
		t.Errorf("git ls-remote of a missing app: %v\n%s", err, out)
	}

	work := t.TempDir()
	for _, args := range [][]string{{"init", "-q", "-b", "feature"}, {"commit", "-q", "--allow-empty", "-m", "first"}} {
		if out, err := git(t, work, home, key, args...); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	out, err := git(t, work, home, key, "push", sshRemote, "feature")
	if err != nil || !strings.Contains(out, "not the deploy branch") {
		t.Fatalf("git push of a branch that does not deploy: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(root, "acme", "hello.git")); err != nil {
		t.Errorf("repository not in --root-dir: %v", err)
	}
	// The deploy branch is the App's at each push: once spec.source.branch
	// names feature (as bex apps set --branch writes it), the same push
	// builds (a new commit: the server has the first). An empty commit has
	// nothing to detect, so the build fails, past the branch check.
	if err := kube.Get(ctx, client.ObjectKeyFromObject(app), app); err != nil {
		t.Fatal(err)
	}
	app.Spec.Source.Branch = "feature"
	if err := kube.Update(ctx, app); err != nil {
		t.Fatalf("setting the deploy branch: %v", err)
	}
	if out, err := git(t, work, home, key, "commit", "-q", "--allow-empty", "-m", "second"); err != nil {
		t.Fatalf("git commit: %v\n%s", err, out)
	}
	out, err = git(t, work, home, key, "push", sshRemote, "feature")
	if strings.Contains(out, "not the deploy branch") || !strings.Contains(out, "-----> Build ") {
		t.Fatalf("git push of the new deploy branch did not build: %v\n%s", err, out)
	}
	out, err = git(t, home, home, key, "ls-remote", remote(token, "hello"))
	if err != nil || !strings.Contains(out, "refs/heads/feature") {
		t.Errorf("git ls-remote after the push: %v\n%s", err, out)
	}
}
