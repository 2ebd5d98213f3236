package edge_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
	"bex.co/bex/internal/appmetrics"
	"bex.co/bex/internal/edge"
	"bex.co/bex/internal/store"
	"bex.co/bex/test/platformtest"
	"bex.co/bex/web/api"
	"bex.co/bex/web/api/apiclient"
)

// TestAppSeriesFromTwoEdges is the cluster install's per-app series end
// to end: two bex-edge processes count the requests they route to an app
// of tenant acme, and bex-web (its sampler over the kube driver on a real
// apiserver, Postgres) reads both edges' totals: acme's series in
// GET /api/v1/apps/shop/metrics (not 501) hold requests from each edge
// (edge B's are 503s), with latencies; tenant beta's app of the same name
// has none of them. The edges' totals answer 401 without their token,
// also to a tenant's API token, while /metrics stays open to Prometheus.
// When bex-web stops, the replica that holds the series lock saves them.
func TestAppSeriesFromTwoEdges(t *testing.T) {
	ctrl.SetLogger(logr.Discard())
	bin := platformtest.BuildBinaries(t, "bex-edge", "bex-web")
	cp, dbURL, _, kube := startCluster(t)
	// Binaries built and the control plane up, the test itself is quick.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	st, err := store.Open(ctx, dbURL)
	must(t, err)
	defer st.Close()

	appIP, appPort := serveApp(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/fail" {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "shop")
	})
	tokens := map[string]string{}
	for _, tenant := range []string{"acme", "beta"} {
		prepareTenant(ctx, t, cp.RESTConfig(), tenant)
		label := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"`+api.TenantLabel+`":"`+tenant+`"}}}`))
		must(t, kube.Patch(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tenant}}, label))
		tn, err := st.CreateTenant(ctx, tenant)
		must(t, err)
		tokens[tenant], _, err = st.CreateToken(ctx, tn.ID, "", "test")
		must(t, err)
		must(t, kube.Create(ctx, &platformv1alpha1.App{ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: "shop"}}))
	}
	makeService(ctx, t, kube, "acme", "shop", appLabels("acme", "shop"), appIP, appPort)

	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "app-metrics-token")
	const edgeToken = "0123456789abcdef0123456789abcdef"
	must(t, os.WriteFile(tokenFile, []byte(edgeToken+"\n"), 0o600))
	caDir := filepath.Join(dir, "ca")
	ca, err := edge.LoadOrCreateLocalCA(caDir)
	must(t, err)
	ports := freePorts(t, 8)
	common := []string{"--kubeconfig", cp.KubeconfigPath(), "--database-url", dbURL, "--local-ca-dir", caDir,
		"--app-domain", "apps.test", "--app-metrics-token-file", tokenFile}
	edgeA := startEdge(ctx, t, bin, "edge-a", ports[:3], common...)
	edgeB := startEdge(ctx, t, bin, "edge-b", ports[3:6], common...)

	// The totals hold every tenant's traffic: no token, or a tenant's
	// API token, is refused; Prometheus's /metrics stays open.
	totalsURL := fmt.Sprintf("http://127.0.0.1:%d%s", edgeA.metricsPort, appmetrics.TotalsPath)
	for name, bearer := range map[string]string{"no token": "", "acme's API token": tokens["acme"], "the token's prefix": edgeToken[:16]} {
		if code := bearerGet(ctx, t, totalsURL, bearer); code != http.StatusUnauthorized {
			t.Errorf("GET %s with %s: %d, want 401", appmetrics.TotalsPath, name, code)
		}
	}
	if code := bearerGet(ctx, t, totalsURL, edgeToken); code != http.StatusOK {
		t.Errorf("GET %s with the token: %d, want 200", appmetrics.TotalsPath, code)
	}
	if code := bearerGet(ctx, t, fmt.Sprintf("http://127.0.0.1:%d/metrics", edgeA.metricsPort), ""); code != http.StatusOK {
		t.Errorf("GET /metrics without a token: %d, want 200", code)
	}

	listen := fmt.Sprintf("127.0.0.1:%d", ports[6])
	stopWeb := startWeb(ctx, t, bin, "http://"+listen+"/api/v1/healthz",
		"--kubeconfig", cp.KubeconfigPath(), "--workload-kubeconfig", cp.KubeconfigPath(),
		"--listen", listen, "--ops-listen", fmt.Sprintf("127.0.0.1:%d", ports[7]), "--work-dir", t.TempDir(),
		"--git-base", "https://git.example.test", "--app-domain", "apps.test", "--registry", "127.0.0.1:5000",
		"--edge-metrics", fmt.Sprintf("127.0.0.1:%d", edgeA.metricsPort), "--edge-metrics", fmt.Sprintf("127.0.0.1:%d", edgeB.metricsPort),
		"--edge-metrics-token-file", tokenFile, "--app-metrics-interval", "5s", "--database-url", dbURL)

	host := edge.Hostname("acme", "shop", "apps.test")
	metrics := func(ctx context.Context, tenant string) (apiclient.AppMetrics, error) {
		var m apiclient.AppMetrics
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+listen+"/api/v1/apps/shop/metrics", nil)
		req.Header.Set("Authorization", "Bearer "+tokens[tenant])
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return m, err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(resp.Body)
			return m, fmt.Errorf("GET metrics of %s/shop: %d %s", tenant, resp.StatusCode, b)
		}
		return m, json.NewDecoder(resp.Body).Decode(&m)
	}
	var seen apiclient.AppMetrics
	platformtest.Eventually(t, 3*time.Minute, "acme's series with the requests of both edges", func(ctx context.Context) error {
		for _, e := range []struct {
			port int
			path string
			want int
		}{{edgeA.https, "/", 200}, {edgeA.https, "/", 200}, {edgeB.https, "/fail", 503}} {
			if code, err := httpsGet(ctx, e.port, host, e.path, ca.Pool()); err != nil || code != e.want {
				return fmt.Errorf("GET https://%s%s on port %d: %d %v, want %d", host, e.path, e.port, code, err, e.want)
			}
		}
		m, err := metrics(ctx, "acme")
		if err != nil {
			return err
		}
		var requests, errs uint64
		latency := false
		for _, p := range m.Points {
			requests += p.Requests
			errs += p.Errors
			latency = latency || p.P50Seconds != nil && p.P99Seconds != nil
		}
		if errs == 0 || requests <= errs || !latency {
			return fmt.Errorf("%d points: %d requests, %d errors, latencies %v; want requests of edge A (200) and edge B (503)", len(m.Points), requests, errs, latency)
		}
		seen = m
		return nil
	})
	t.Logf("acme/shop: %d points, interval %vs, note %q", len(seen.Points), seen.IntervalSeconds, seen.Note)
	beta, err := metrics(ctx, "beta")
	must(t, err)
	if len(beta.Points) == 0 {
		t.Error("beta/shop has no point: its App is not sampled")
	}
	for _, p := range beta.Points {
		if p.Requests != 0 {
			t.Errorf("beta/shop has a point with %d requests: another tenant's app's", p.Requests)
		}
	}

	stopWeb()
	saved, err := st.LoadAppSeries(ctx, []string{"acme"}, []string{"shop"}, time.Now().Add(-time.Hour))
	must(t, err)
	if len(saved) != 1 {
		t.Errorf("after bex-web stopped: %d saved series of acme/shop, want 1 (the lock holder saves when it stops)", len(saved))
	}
}

// bearerGet answers the status of GET url with bearer (none if empty).
func bearerGet(ctx context.Context, t *testing.T, url, bearer string) int {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	resp.Body.Close()
	return resp.StatusCode
}

// httpsGet asks the edge at port for https://host/path and returns the
// status.
func httpsGet(ctx context.Context, port int, host, path string, roots *x509.CertPool) (int, error) {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, fmt.Sprintf("127.0.0.1:%d", port))
		},
		TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: host},
	}
	defer tr.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+host+path, nil)
	if err != nil {
		return 0, err
	}
	resp, err := (&http.Client{Transport: tr, Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// startWeb starts bex-web with args and waits until health answers 200;
// stop interrupts it and waits for it to exit.
func startWeb(ctx context.Context, t *testing.T, bin, health string, args ...string) (stop func()) {
	t.Helper()
	var out platformtest.SyncBuffer
	cmd := exec.CommandContext(ctx, bin+"/bex-web", args...)
	cmd.Env = append(os.Environ(), "DATABASE_URL=")
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 45 * time.Second
	must(t, cmd.Start())
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	stop = func() {
		_ = cmd.Process.Signal(os.Interrupt)
		<-exited
	}
	t.Cleanup(func() {
		stop()
		if t.Failed() {
			t.Logf("bex-web output:\n%s", out.String())
		}
	})
	platformtest.Eventually(t, 5*time.Minute, "bex-web to serve", func(ctx context.Context) error {
		select {
		case <-exited:
			t.Fatalf("bex-web exited before it served: %s", out.String())
		default:
		}
		code, err := httpStatus(ctx, health)
		if err != nil {
			return err
		}
		if code != http.StatusOK || !strings.Contains(out.String(), "Serving") {
			return fmt.Errorf("%s answered %d: %s", health, code, platformtest.LastLine(out.String()))
		}
		return nil
	})
	return stop
}
