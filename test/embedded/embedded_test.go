package embedded_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
	schedulingv1alpha1 "bex.co/bex/apis/scheduling/v1alpha1"
	"bex.co/bex/internal/pgtest"
	"bex.co/bex/test/platformtest"
)

// TestMakeRun starts the embedded platform, checks what it serves through
// the kubeconfig in its env file, stops it with SIGINT, starts it again on
// the same state directory and finds the App created in the first run.
func TestMakeRun(t *testing.T) {
	bin := platformtest.BuildBinaries(t, "bex-embedded")
	state := t.TempDir()
	dbURL := pgtest.NewDatabase(t)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	p := platformtest.Start(ctx, t, bin, state, dbURL)
	env := p.WaitEnv(ctx, t)
	for _, k := range []string{"BEX_KUBECONFIG", "BEX_DATABASE_URL", "BEX_APISERVER", "BEX_STATE_DIR", "BEX_API", "BEX_GIT", "BEX_TOKEN", "BEX_HTTP", "BEX_HTTPS", "BEX_CA", "BEX_DOMAIN"} {
		if env[k] == "" {
			t.Fatalf("env file lacks %s: %v", k, env)
		}
	}
	if env["BEX_DATABASE_URL"] != dbURL {
		t.Fatalf("BEX_DATABASE_URL = %q, want the DATABASE_URL given, %q", env["BEX_DATABASE_URL"], dbURL)
	}
	c := platformtest.Client(t, env["BEX_KUBECONFIG"])

	// Once the env file is there, the API says every component is ready.
	resp, err := http.Get(env["BEX_API"] + "/api/v1/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /api/v1/healthz = %s once ready, want 200", resp.Status)
	}

	// Its services ask for credentials on loopback too: the registry for its
	// token (kept 0600 in the state directory), etcd for a client
	// certificate (plain HTTP gets nothing).
	assertRegistryWantsToken(t, state)
	assertEtcdWantsTLS(t, state)

	// The apiserver serves the App and Route resources.
	cfg, _ := clientcmd.BuildConfigFromFlags("", env["BEX_KUBECONFIG"])
	dc := discovery.NewDiscoveryClientForConfigOrDie(cfg)
	res, err := dc.ServerResourcesForGroupVersion("platform.bex.co/v1alpha1")
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, r := range res.APIResources {
		names[r.Name] = true
	}
	if !names["apps"] || !names["routes"] {
		t.Fatalf("platform.bex.co/v1alpha1 serves %v, want apps and routes", names)
	}

	// An App with an invalid name is refused, with the field named.
	bad := &platformv1alpha1.App{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "Not_A_Label"}}
	err = c.Create(ctx, bad)
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "metadata.name") {
		t.Fatalf("creating App %q: err = %v, want Invalid naming metadata.name", bad.Name, err)
	}

	good := &platformv1alpha1.App{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "kept"}}
	if err := c.Create(ctx, good); err != nil {
		t.Fatal(err)
	}
	// The controller manager runs: the App is placed through the scheduler
	// API (the aggregated bex-apiserver) on the local cluster.
	platformtest.Eventually(t, 10*time.Minute, "the App to be placed", func(ctx context.Context) error {
		got := &platformv1alpha1.App{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(good), got); err != nil {
			return err
		}
		if err := platformtest.HasCondition(got.Status.Conditions, platformv1alpha1.AppPlacedCondition, metav1.ConditionTrue, ""); err != nil {
			return err
		}
		if got.Status.Cluster != "local" {
			return fmt.Errorf("placed on cluster %q, want local", got.Status.Cluster)
		}
		return nil
	})
	placement := &schedulingv1alpha1.Placement{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(good), placement); err != nil {
		t.Fatalf("the App's Placement: %v", err)
	}
	if placement.Spec.Cluster != "local" || placement.Spec.App != "kept" {
		t.Fatalf("Placement spec = %+v, want app kept on cluster local", placement.Spec)
	}

	pids := p.Children(t)
	if len(pids) < 2 {
		t.Fatalf("the platform runs %d child processes, want etcd and kube-apiserver at least", len(pids))
	}
	p.Interrupt(t)
	if _, err := os.Stat(filepath.Join(state, "env")); !os.IsNotExist(err) {
		t.Fatalf("env file still there after the platform stopped: %v", err)
	}
	for _, pid := range pids {
		if syscall.Kill(pid, 0) == nil {
			t.Fatalf("process %d of the platform is still alive after it stopped", pid)
		}
	}

	p = platformtest.Start(ctx, t, bin, state, dbURL)
	env2 := p.WaitEnv(ctx, t)
	for _, k := range []string{"BEX_APISERVER", "BEX_API", "BEX_GIT", "BEX_TOKEN", "BEX_HTTP", "BEX_HTTPS", "BEX_CA"} {
		if env2[k] != env[k] {
			t.Fatalf("%s changed across restarts: %s → %s", k, env[k], env2[k])
		}
	}
	c = platformtest.Client(t, env2["BEX_KUBECONFIG"])
	if err := c.Get(ctx, client.ObjectKeyFromObject(good), &platformv1alpha1.App{}); err != nil {
		t.Fatalf("App created before the restart: %v", err)
	}
	p.Interrupt(t)
}

// assertRegistryWantsToken checks that the platform registry answers an
// anonymous request with 401 and a challenge, and that its token file is the
// platform user's only.
func assertRegistryWantsToken(t *testing.T, state string) {
	t.Helper()
	var ports struct{ Ports map[string]int }
	readJSON(t, filepath.Join(state, "ports.json"), &ports)
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/v2/", ports.Ports["registry"]))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") == "" {
		t.Errorf("anonymous GET /v2/ of the registry: %s, challenge %q; want 401 with one", resp.Status, resp.Header.Get("WWW-Authenticate"))
	}
	fi, err := os.Stat(filepath.Join(state, "registry-token"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("registry-token: %v, %v; want mode 0600", fi, err)
	}
}

// assertEtcdWantsTLS checks that etcd answers no plain HTTP request.
func assertEtcdWantsTLS(t *testing.T, state string) {
	t.Helper()
	var cp struct {
		EtcdClientPort int `json:"etcdClientPort"`
	}
	readJSON(t, filepath.Join(state, "controlplane", "state.json"), &cp)
	c := &http.Client{Timeout: 5 * time.Second}
	if resp, err := c.Get(fmt.Sprintf("http://127.0.0.1:%d/health", cp.EtcdClientPort)); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Error("etcd answered plain HTTP /health with 200")
		}
	}
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("reading %s: %v", path, err)
	}
}
