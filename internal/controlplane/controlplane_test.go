package controlplane_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"bex.co/bex/internal/controlplane"
	"bex.co/bex/internal/controlplane/cptest"
	"bex.co/bex/internal/mvp"
	"bex.co/bex/test/platformtest"
)

// TestMixedVersionProxy starts a 1.36.3 and a 1.37.2 apiserver on one etcd
// and requests, from the 1.36.3 server, a resource only 1.37.2 serves: with
// the peer flags the request is answered through the peer and the rerouted
// counter rises; without them the answer is 404.
func TestMixedVersionProxy(t *testing.T) {
	for _, tc := range []struct {
		name   string
		noMVP  bool
		status int
	}{
		{name: "wired", status: http.StatusOK},
		{name: "not wired", noMVP: true, status: http.StatusNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cp := cptest.StartBare(t,
				controlplane.APIServerSpec{Name: "old", Version: "1.36.3", NoMVP: tc.noMVP},
				controlplane.APIServerSpec{Name: "new", Version: "1.37.2", NoMVP: tc.noMVP},
			)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			oldCfg, newCfg := cp.APIServer("old").RESTConfig(), cp.APIServer("new").RESTConfig()

			assertVersion(t, oldCfg, "v1.36.3")
			assertVersion(t, newCfg, "v1.37.2")

			oldLocal, err := mvp.Discovery(ctx, oldCfg, true)
			if err != nil {
				t.Fatal(err)
			}
			newLocal, err := mvp.Discovery(ctx, newCfg, true)
			if err != nil {
				t.Fatal(err)
			}
			var skew []schema.GroupVersionResource
			for _, gvr := range newLocal.Minus(oldLocal) {
				if newLocal.Has(gvr, "list") {
					skew = append(skew, gvr)
				}
			}
			if len(skew) == 0 {
				t.Fatal("1.37.2 serves no listable resource that 1.36.3 lacks; the skew set is empty")
			}
			t.Logf("served by 1.37.2 only: %v", skew)
			gvr := skew[0]
			path := mvp.ListPath(gvr)

			before := rerouted(ctx, t, oldCfg, gvr)
			// Peer discovery syncs in the background.
			platformtest.Eventually(t, 30*time.Second, "GET "+path+" on the 1.36.3 server", func(ctx context.Context) error {
				if got := status(ctx, t, oldCfg, path); got != tc.status {
					return fmt.Errorf("status %d, want %d", got, tc.status)
				}
				return nil
			})
			after := rerouted(ctx, t, oldCfg, gvr)
			if tc.noMVP {
				// Ask a few more times: without the proxy the 404 is not transient.
				for range 5 {
					if s := status(ctx, t, oldCfg, path); s != http.StatusNotFound {
						t.Fatalf("GET %s without MVP: status %d, want 404", path, s)
					}
				}
				if after != before {
					t.Fatalf("rerouted counter moved without MVP: %v → %v", before, after)
				}
				return
			}
			if after <= before {
				t.Fatalf("%s{resource=%q} did not rise: %v → %v", mvp.MetricRerouted, gvr.Resource, before, after)
			}
			// The peer-merged discovery of the old server lists what it proxies.
			merged, err := mvp.Discovery(ctx, oldCfg, false)
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := merged[gvr]; !ok {
				t.Fatalf("peer-merged discovery of the 1.36.3 server lacks %v", gvr)
			}
		})
	}
}

func status(ctx context.Context, t *testing.T, cfg *rest.Config, path string) int {
	t.Helper()
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, cfg.Host+path, nil)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func rerouted(ctx context.Context, t *testing.T, cfg *rest.Config, gvr schema.GroupVersionResource) float64 {
	t.Helper()
	m, err := mvp.Scrape(ctx, cfg, mvp.MetricRerouted)
	if err != nil {
		t.Fatal(err)
	}
	return m.Sum(mvp.MetricRerouted, map[string]string{"resource": gvr.Resource})
}

func assertVersion(t *testing.T, cfg *rest.Config, want string) {
	t.Helper()
	cs := kubernetes.NewForConfigOrDie(cfg)
	v, err := cs.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	if v.GitVersion != want {
		t.Fatalf("/version of %s says %q, want %q", cfg.Host, v.GitVersion, want)
	}
}

// TestDataDirSurvivesRestart shows that a plane started on a DataDir finds
// the objects, certificates and address of the previous start, and that Stop
// leaves no process behind.
func TestDataDirSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := func() *controlplane.ControlPlane {
		cp, err := controlplane.Start(ctx, controlplane.Options{DataDir: dir, Log: os.Stderr})
		if err != nil {
			t.Fatal(err)
		}
		return cp
	}
	cp := start()
	firstURL := cp.Endpoint()
	cs := kubernetes.NewForConfigOrDie(cp.RESTConfig())
	if _, err := cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "kept"}, Data: map[string]string{"k": "v"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pids := []int{}
	for _, s := range cp.APIServers() {
		pids = append(pids, s.PID())
	}
	cp.Stop()
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); err == nil {
			t.Fatalf("process %d still alive after Stop", pid)
		}
	}

	cp = start()
	defer cp.Stop()
	if cp.Endpoint() != firstURL {
		t.Fatalf("endpoint moved across restarts: %s → %s", firstURL, cp.Endpoint())
	}
	cm, err := kubernetes.NewForConfigOrDie(cp.RESTConfig()).CoreV1().ConfigMaps("default").Get(ctx, "kept", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("object written before the restart: %v", err)
	}
	if cm.Data["k"] != "v" {
		t.Fatalf("object data = %v", cm.Data)
	}
	if _, err := os.Stat(filepath.Join(dir, "admin.kubeconfig")); err != nil {
		t.Fatal(err)
	}
}

// TestUserConfigIsAuthorizedByRBAC shows that a user certificate from the
// plane authenticates as that user and is held to RBAC (here: no rights).
func TestUserConfigIsAuthorizedByRBAC(t *testing.T) {
	cp := cptest.StartBare(t)
	cfg, err := cp.UserConfig("tenant-a", "bex:tenants")
	if err != nil {
		t.Fatal(err)
	}
	dc := dynamic.NewForConfigOrDie(cfg)
	_, err = dc.Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace("default").List(context.Background(), metav1.ListOptions{})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("list as an unprivileged user: err = %v, want Forbidden", err)
	}
	if !strings.Contains(err.Error(), `"tenant-a"`) {
		t.Fatalf("forbidden error does not name the user: %v", err)
	}
}
