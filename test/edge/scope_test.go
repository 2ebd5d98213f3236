package edge_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"bex.co/bex/internal/certstore"
	"bex.co/bex/internal/edge"
	"bex.co/bex/internal/runtime/kube"
	"bex.co/bex/internal/store"
	"bex.co/bex/test/platformtest"
)

// TestEdgeServesOnlyTenantApps runs bex-edge against a real apiserver that
// holds, besides an app's Service in a tenant namespace, the apiserver's
// own kubernetes Service in default, a Service in kube-system that even
// carries an app's labels, and a Service in the tenant's namespace that
// the platform did not make. Only the app is served: every other
// "<service>-<namespace>" name gets the edge's unknown-host answer on HTTP,
// no TLS handshake and no certificate; and the edge's cache never holds
// the other Services.
func TestEdgeServesOnlyTenantApps(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bin := platformtest.BuildBinaries(t, "bex-edge")
	cp, dbURL, scheme, kc := startCluster(t)

	appIP, appPort := serveApp(t, func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "app at %s", r.Host)
	})

	service := func(ns, name string, labels map[string]string) {
		t.Helper()
		makeService(ctx, t, kc, ns, name, labels, appIP, appPort)
	}
	prepareTenant(ctx, t, cp.RESTConfig(), "acme")
	service("acme", "shop", appLabels("acme", "shop"))
	// A Service the platform did not make, in the tenant's namespace.
	service("acme", "sidecar", nil)
	// A Service in kube-system with an app's labels: not a tenant's
	// namespace.
	service("kube-system", "metrics", appLabels("kube-system", "metrics"))
	// The apiserver's own Service, with the EndpointSlice a cluster's
	// endpoint reconciler gives it (this control plane runs none). A slice
	// may not hold a loopback address: the host's, with the apiserver's
	// port, stands for the apiserver's.
	apiURL, err := url.Parse(cp.RESTConfig().Host)
	must(t, err)
	apiPort, err := strconv.Atoi(apiURL.Port())
	must(t, err)
	must(t, kc.Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "default", Name: "kubernetes", Labels: map[string]string{discoveryv1.LabelServiceName: "kubernetes"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{appIP}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("https"), Port: ptr.To(int32(apiPort))}},
	}))

	caDir := t.TempDir()
	ca, err := edge.LoadOrCreateLocalCA(caDir)
	must(t, err)
	e := startEdge(ctx, t, bin, "edge", freePorts(t, 3),
		"--kubeconfig", cp.KubeconfigPath(), "--database-url", dbURL, "--local-ca-dir", caDir, "--app-domain", "apps.test")

	body, _, err := tlsGet(ctx, e.https, "shop-acme.apps.test", ca.Pool())
	if err != nil || body != "app at shop-acme.apps.test" {
		t.Fatalf("the tenant's app: %q, %v", body, err)
	}

	// httpAnswer returns the status and body of the edge's HTTP port for
	// host.
	httpAnswer := func(host string) string {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/", e.http), nil)
		must(t, err)
		req.Host = host
		noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := noFollow.Do(req)
		must(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return fmt.Sprintf("%d %s", resp.StatusCode, b)
	}
	unknown := httpAnswer("nothing-acme.apps.test")
	if unknown[:3] != "404" {
		t.Fatalf("an unknown host answered %q, want a 404", unknown)
	}

	st, err := store.Open(ctx, dbURL)
	must(t, err)
	t.Cleanup(st.Close)
	storage, err := certstore.New(st.Pool(), certstore.Options{})
	must(t, err)
	certs := &edge.Certificates{Storage: storage, IssuerKeys: []string{edge.LocalCAIssuerKey}}
	for _, host := range []string{"kubernetes-default.apps.test", "metrics-kube-system.apps.test", "sidecar-acme.apps.test"} {
		if got := httpAnswer(host); got != unknown {
			t.Errorf("HTTP for %s answered %q, want the unknown-host answer %q", host, got, unknown)
		}
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 30 * time.Second}, "tcp", fmt.Sprintf("127.0.0.1:%d", e.https),
			&tls.Config{ServerName: host, RootCAs: ca.Pool()})
		if err == nil {
			conn.Close()
			t.Errorf("the edge completed a TLS handshake for %s", host)
		}
		state, err := certs.State(ctx, host)
		must(t, err)
		if state.Issued {
			t.Errorf("the edge obtained a certificate for %s", host)
		}
	}

	// A cache made as the edge makes it holds only Services and slices
	// with an app's labels, and tenants' namespaces: not the apiserver's
	// Service nor the unlabelled one. (A Service that copies an app's
	// labels in another namespace is cached, and never routed: above.)
	c, err := cache.New(cp.RESTConfig(), edge.SliceCacheOptions(scheme))
	must(t, err)
	cctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() { _ = c.Start(cctx) }()
	var svcs corev1.ServiceList
	// A cache refuses reads until Start has begun.
	platformtest.Eventually(t, 5*time.Minute, "the cache to start", func(ctx context.Context) error { return c.List(ctx, &svcs) })
	var slices discoveryv1.EndpointSliceList
	must(t, c.List(ctx, &slices))
	var nss corev1.NamespaceList
	must(t, c.List(ctx, &nss))
	var got []string
	for _, s := range svcs.Items {
		got = append(got, "service "+s.Namespace+"/"+s.Name)
	}
	for _, s := range slices.Items {
		got = append(got, "slice "+s.Namespace+"/"+s.Name)
	}
	for _, n := range nss.Items {
		got = append(got, "namespace "+n.Name)
	}
	sort.Strings(got)
	if want := "[namespace acme service acme/shop service kube-system/metrics slice acme/shop-1 slice kube-system/metrics-1]"; fmt.Sprint(got) != want {
		t.Errorf("the edge's cache holds %v, want %s", got, want)
	}
}

// prepareTenant makes the tenant's namespace as the kube runtime does.
func prepareTenant(ctx context.Context, t *testing.T, cfg *rest.Config, tenant string) {
	t.Helper()
	driver, err := kube.New(cfg, kube.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := driver.PrepareNamespace(ctx, tenant); err != nil {
		t.Fatal(err)
	}
}

// appLabels are the labels the kube runtime puts on an app's Service.
func appLabels(tenant, app string) map[string]string {
	return map[string]string{
		kube.LabelName: app, kube.LabelManagedBy: "bex", kube.LabelTenant: tenant, kube.LabelApp: app, kube.LabelRelease: "1",
	}
}

// makeService makes a Service and its EndpointSlice to ip:port, with
// labels on both, as the EndpointSlice controller copies them.
func makeService(ctx context.Context, t *testing.T, kc client.Client, ns, name string, labels map[string]string, ip string, port int32) {
	t.Helper()
	if err := kc.Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}},
	}); err != nil {
		t.Fatal(err)
	}
	sliceLabels := maps.Clone(labels)
	if sliceLabels == nil {
		sliceLabels = map[string]string{}
	}
	sliceLabels[discoveryv1.LabelServiceName] = name
	if err := kc.Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: name + "-1", Labels: sliceLabels},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To(port)}},
	}); err != nil {
		t.Fatal(err)
	}
}
