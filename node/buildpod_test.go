package node_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"bex.co/bex/builder/build"
	"bex.co/bex/builder/buildagent"
	"bex.co/bex/builder/buildpod"
	"bex.co/bex/internal/registry"
	"bex.co/bex/internal/runtime"
	"bex.co/bex/internal/runtime/kube"
	"bex.co/bex/node"
	"bex.co/bex/test/platformtest"
)

// buildAttack is a build command that tries what tenant code in a build
// would: read a file of the builder's machine and the service-account
// token a pod of the platform's mounts, then builds what the app serves.
const buildAttack = `cat SECRET 2>/dev/null && echo "read: allowed" || echo "read: denied"
test -e /var/run/secrets/kubernetes.io/serviceaccount/token && echo "token: present" || echo "token: absent"
echo built > built.txt`

// TestBuildPodOnTheNode builds an app whose build steps run in a Pod of
// the tenant's, which bex-node runs: the steps cannot read the builder's
// files nor find a service-account token, the image holds what they
// built, and the Pod and its Secret are gone afterwards. A Pod whose
// builder went mid-step ends at its agent's idle limit. The same build
// with its steps on the builder's machine reads the file: the Pod is what
// keeps it out. A builder image that cannot be pulled fails the build
// saying so, and leaves nothing behind.
func TestBuildPodOnTheNode(t *testing.T) {
	ctrl.SetLogger(logr.Discard())
	f := start(t, func(f *fixture, o *node.Options) {
		o.Keychain = build.Keychain(f.Registry, registry.Auth(registryToken))
	})
	const tenant = "acme"
	f.Namespace(t, tenant)
	d, err := kube.New(f.CP.RESTConfig(), kube.Options{PollInterval: 200 * time.Millisecond, RunStartTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(t.TempDir(), "operator-token")
	if err := os.WriteFile(secret, []byte("s3cr3t-of-the-builder"), 0o644); err != nil {
		t.Fatal(err)
	}
	repo, commit := gitRepo(t, map[string]string{"Procfile": "web: cat built.txt\n"})
	builder := func(t *testing.T, image string) *build.Builder {
		opts := build.Options{WorkRoot: t.TempDir(), CacheDir: t.TempDir(), Registry: f.Registry, RegistryAuth: registry.Auth(registryToken)}
		if image != "" {
			remote, err := buildpod.Remote(buildpod.Options{Driver: d, Image: image, Timeout: 5 * time.Minute,
				Resources: runtime.Resources{CPU: "500m", Memory: "256Mi"}, Disk: "1Gi"})
			if err != nil {
				t.Fatal(err)
			}
			// The Pod as the agent answers: its spec is checked.
			opts.Remote = func(ctx context.Context, tenant, app string) (build.RemoteAgent, error) {
				a, err := remote(ctx, tenant, app)
				if err == nil {
					checkBuildPod(t, f, tenant)
				}
				return a, err
			}
		}
		b, err := build.New(opts)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	req := build.Request{Tenant: tenant, App: "web", RepoDir: repo, Commit: commit,
		Command: strings.ReplaceAll(buildAttack, "SECRET", secret)}
	noneLeft := func(t *testing.T) {
		t.Helper()
		ctx := context.Background()
		sel := metav1.ListOptions{LabelSelector: kube.LabelBuildOf + "=web"}
		pods, err := f.Admin.CoreV1().Pods(tenant).List(ctx, sel)
		if err != nil || len(pods.Items) != 0 {
			t.Errorf("build pods left: %v %v", len(pods.Items), err)
		}
		secrets, err := f.Admin.CoreV1().Secrets(tenant).List(ctx, sel)
		if err != nil || len(secrets.Items) != 0 {
			t.Errorf("build secrets left: %v %v", len(secrets.Items), err)
		}
	}

	t.Run("steps in a pod", func(t *testing.T) {
		var log strings.Builder
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		res, err := builder(t, f.AppImage).Build(ctx, req, &log)
		t.Logf("build log:\n%s", log.String())
		if err != nil {
			t.Fatalf("Build: %v", err)
		}
		for _, want := range []string{"Starting the build's pod", "read: denied", "token: absent"} {
			if !strings.Contains(log.String(), want) {
				t.Errorf("the build's log lacks %q", want)
			}
		}
		if strings.Contains(log.String(), "s3cr3t") {
			t.Errorf("a build step read the builder's file")
		}
		dir := filepath.Join(t.TempDir(), "release")
		if _, err := build.Unpack(ctx, res.Image, dir, build.Keychain(f.Registry, registry.Auth(registryToken))); err != nil {
			t.Fatal(err)
		}
		if b, err := os.ReadFile(filepath.Join(dir, "built.txt")); err != nil || string(b) != "built\n" {
			t.Errorf("built.txt in the image: %q, %v; want what the step wrote", b, err)
		}
		noneLeft(t)
	})

	// A git receiver that stops mid-build (a crash, a restart) cuts its
	// step's call and calls no more: the agent kills the step and, once
	// idle for its limit, exits, and the Pod ends long before its
	// deadline of 5 minutes.
	t.Run("builder gone", func(t *testing.T) {
		remote, err := buildpod.Remote(buildpod.Options{Driver: d, Image: f.AppImage, Timeout: 5 * time.Minute, IdleTimeout: 3 * time.Second,
			Resources: runtime.Resources{CPU: "500m", Memory: "256Mi"}, Disk: "1Gi"})
		if err != nil {
			t.Fatal(err)
		}
		a, err := remote(context.Background(), tenant, "web")
		if err != nil {
			t.Fatalf("starting the build's agent: %v", err)
		}
		defer a.Close()
		step, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		if err := a.Run(step, buildagent.Command{Argv: []string{"/bin/sh", "-c", "sleep 600"}}, io.Discard); err == nil {
			t.Fatal("a step of 10 minutes cut after 3 s succeeded")
		}
		platformtest.Eventually(t, time.Minute, "the build Pod of a gone builder ended", func(ctx context.Context) error {
			pods, err := f.Admin.CoreV1().Pods(tenant).List(ctx, metav1.ListOptions{LabelSelector: kube.LabelBuildOf + "=web"})
			if err != nil || len(pods.Items) != 1 {
				return fmt.Errorf("build pods: %v, %v; want one", len(pods.Items), err)
			}
			p := pods.Items[0]
			for _, cs := range p.Status.ContainerStatuses {
				if term := cs.State.Terminated; term != nil {
					if term.ExitCode != 1 {
						return fmt.Errorf("the agent exited with %d (%s), want 1: the builder is gone", term.ExitCode, term.Reason)
					}
					return nil
				}
			}
			return fmt.Errorf("the pod is %s", p.Status.Phase)
		})
	})

	t.Run("steps on the builder's machine", func(t *testing.T) {
		var log strings.Builder
		if _, err := builder(t, "").Build(context.Background(), req, &log); err != nil {
			t.Fatalf("Build: %v\n%s", err, log.String())
		}
		if !strings.Contains(log.String(), "s3cr3t-of-the-builder") || !strings.Contains(log.String(), "read: allowed") {
			t.Errorf("without a pod the step did not read the file; the attack proves nothing:\n%s", log.String())
		}
	})

	t.Run("builder image that cannot be pulled", func(t *testing.T) {
		var log strings.Builder
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		_, err := builder(t, f.Registry+"/nowhere/builder:1").Build(ctx, req, &log)
		if err == nil || !strings.Contains(err.Error(), "did not start") || !strings.Contains(err.Error(), "ErrImagePull") {
			t.Errorf("Build: %v; want the pod's start failure (ErrImagePull)", err)
		}
		noneLeft(t)
	})
}

// checkBuildPod checks the spec of the tenant's one build Pod: no token,
// non-root, the build's resources, disk and deadline.
func checkBuildPod(t *testing.T, f *fixture, tenant string) {
	t.Helper()
	pods, err := f.Admin.CoreV1().Pods(tenant).List(context.Background(), metav1.ListOptions{LabelSelector: kube.LabelBuildOf + "=web"})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("build pods: %v, %v; want one", len(pods.Items), err)
	}
	p := pods.Items[0]
	c := p.Spec.Containers[0]
	if p.Spec.AutomountServiceAccountToken == nil || *p.Spec.AutomountServiceAccountToken ||
		p.Spec.SecurityContext.RunAsNonRoot == nil || !*p.Spec.SecurityContext.RunAsNonRoot {
		t.Errorf("build pod mounts a token or may run as root: %+v", p.Spec)
	}
	if lim := c.Resources.Limits; lim.Memory().String() != "256Mi" || lim.Cpu().String() != "500m" || lim.StorageEphemeral().String() != "1Gi" {
		t.Errorf("build pod limits %v, want 500m CPU, 256Mi memory, 1Gi disk", lim)
	}
	if p.Spec.ActiveDeadlineSeconds == nil || *p.Spec.ActiveDeadlineSeconds != 300 {
		t.Errorf("build pod deadline %v, want 300 s", p.Spec.ActiveDeadlineSeconds)
	}
	for _, e := range c.Env {
		if e.Value != "" {
			t.Errorf("build pod has %s as a plain value; its token must come from its Secret", e.Name)
		}
	}
}

// gitRepo commits files with the real git and returns a bare repository
// holding the commit, and the commit's name.
func gitRepo(t *testing.T, files map[string]string) (string, string) {
	t.Helper()
	work := t.TempDir()
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(work, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	repo := filepath.Join(t.TempDir(), "app.git")
	var commit string
	for _, args := range [][]string{
		{"init", "-q", "-b", "main"}, {"add", "-A"},
		{"-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "app"},
		{"clone", "-q", "--bare", work, repo}, {"rev-parse", "HEAD"},
	} {
		cmd := exec.Command("git", args...)
		cmd.Dir = work
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		commit = strings.TrimSpace(string(out))
	}
	return repo, commit
}
