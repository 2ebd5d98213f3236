package edge_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
	"bex.co/bex/controllers"
	"bex.co/bex/internal/acmetest"
	"bex.co/bex/internal/certstore"
	"bex.co/bex/internal/childproc"
	"bex.co/bex/internal/controlplane"
	"bex.co/bex/internal/controlplane/cptest"
	"bex.co/bex/internal/domains"
	"bex.co/bex/internal/edge"
	"bex.co/bex/internal/pgtest"
	"bex.co/bex/internal/store"
	"bex.co/bex/test/platformtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// freePorts returns n distinct loopback ports nothing listens on.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	ports, err := childproc.FreePorts("127.0.0.1", n)
	if err != nil {
		t.Fatal(err)
	}
	return ports
}

// edgeProc is one bex-edge process.
type edgeProc struct {
	name                     string
	http, https, metricsPort int
	out                      platformtest.SyncBuffer
}

func (e *edgeProc) output() string { return e.out.String() }

// startEdge starts bex-edge with its HTTP, HTTPS and metrics listeners on
// ports[0], ports[1] and ports[2].
func startEdge(ctx context.Context, t *testing.T, bin, name string, ports []int, args ...string) *edgeProc {
	t.Helper()
	httpPort, httpsPort := ports[0], ports[1]
	e := &edgeProc{name: name, http: httpPort, https: httpsPort, metricsPort: ports[2]}
	cmd := exec.CommandContext(ctx, bin+"/bex-edge", append([]string{
		"--http-listen", fmt.Sprintf("127.0.0.1:%d", httpPort),
		"--https-listen", fmt.Sprintf("127.0.0.1:%d", httpsPort),
		"--metrics-listen", fmt.Sprintf("127.0.0.1:%d", e.metricsPort),
	}, args...)...)
	cmd.Stdout, cmd.Stderr = &e.out, &e.out
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 15 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		<-exited
		if t.Failed() {
			t.Logf("%s output:\n%s", name, e.output())
		}
	})
	// ctx, which the process runs under, still bounds the wait: the
	// process ends with it.
	platformtest.Eventually(t, 10*time.Minute, name+" to serve", func(ctx context.Context) error {
		select {
		case <-exited:
			// A port taken meanwhile, a flag refused: waiting longer
			// would not help.
			t.Fatalf("%s exited before it served: %s", name, e.output())
		default:
		}
		code, err := httpStatus(ctx, fmt.Sprintf("http://127.0.0.1:%d/healthz", e.metricsPort))
		if err != nil {
			return err
		}
		if !strings.Contains(e.output(), "Serving") {
			return fmt.Errorf("/healthz answered %d, the log does not say Serving yet: %s", code, platformtest.LastLine(e.output()))
		}
		return nil
	})
	return e
}

// tlsGet asks the edge at port for https://host/ and returns the answer and
// the leaf certificate it served.
func tlsGet(ctx context.Context, port int, host string, roots *x509.CertPool) (string, *x509.Certificate, error) {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, fmt.Sprintf("127.0.0.1:%d", port))
		},
		TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: host},
	}
	defer tr.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+host+"/", nil)
	if err != nil {
		return "", nil, err
	}
	resp, err := (&http.Client{Transport: tr, Timeout: 90 * time.Second}).Do(req)
	if err != nil {
		return "", nil, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return string(b), nil, fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	return string(b), resp.TLS.PeerCertificates[0], nil
}

// TestTwoEdgesOneCertificate runs two bex-edge processes on one Postgres in
// front of an app, with Routes and EndpointSlices in a real apiserver and
// certificates from pebble. Both serve the Route's hostname with the same
// certificate, obtained once; a hostname no Route claims gets no
// certificate and pebble sees no order for it.
func TestTwoEdgesOneCertificate(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	bin := platformtest.BuildBinaries(t, "bex-edge")
	cp, dbURL, scheme, kube := startCluster(t)

	// The app: one upstream behind a Service's EndpointSlice, as in a
	// workload cluster.
	appIP, appPort := serveApp(t, func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "shop at %s via %s", r.Host, r.Header.Get("X-Forwarded-Proto"))
	})

	prepareTenant(ctx, t, cp.RESTConfig(), "acme")
	makeService(ctx, t, kube, "acme", "shop", appLabels("acme", "shop"), appIP, appPort)
	must(t, kube.Create(ctx, &platformv1alpha1.App{ObjectMeta: metav1.ObjectMeta{Namespace: "acme", Name: "shop"}}))
	for _, host := range []string{"www.shop.test", "dark.shop.test"} {
		must(t, kube.Create(ctx, &platformv1alpha1.Route{
			ObjectMeta: metav1.ObjectMeta{Namespace: "acme", Name: strings.ReplaceAll(host, ".", "-")},
			Spec:       platformv1alpha1.RouteSpec{Hostname: host, AppRef: platformv1alpha1.AppReference{Name: "shop"}},
		}))
	}

	// pebble validates challenges on edge A's ports; edge B obtains the
	// certificate only if A answers B's challenge through the shared store.
	ports := freePorts(t, 6)
	httpA, httpsA, httpsB := ports[0], ports[1], ports[4]
	pebble := acmetest.Start(t, acmetest.Options{HTTPPort: httpA, TLSPort: httpsA})
	pebble.SetA("www.shop.test", "127.0.0.1")
	pebble.SetA("evil.shop.test", "127.0.0.1")
	// The tenant proves it owns both names, as the Route's status asks.
	for _, host := range []string{"www.shop.test", "dark.shop.test"} {
		pebble.AddTXT(domains.ChallengeName(host), domains.Token("apps.test", "acme", host))
	}
	// dark.shop.test has a Route but no DNS record: its challenge fails.
	startRouteController(ctx, t, cp.RESTConfig(), scheme, dbURL, pebble)
	waitRoute(t, kube, "www-shop-test", platformv1alpha1.RouteAdmittedCondition, platformv1alpha1.RouteAcceptedReason)
	waitRoute(t, kube, "dark-shop-test", platformv1alpha1.RouteAdmittedCondition, platformv1alpha1.RouteAcceptedReason)
	common := []string{
		"--kubeconfig", cp.KubeconfigPath(), "--database-url", dbURL,
		"--acme-directory", pebble.DirectoryURL(), "--acme-ca-file", pebble.DirectoryCAFile(),
		"--app-domain", "apps.test",
	}
	edgeA := startEdge(ctx, t, bin, "edge-a", ports[:3], common...)
	edgeB := startEdge(ctx, t, bin, "edge-b", ports[3:], common...)

	roots, err := pebble.IssuerRoots(ctx)
	must(t, err)
	// Both edges get the first request at the same moment.
	type answer struct {
		body string
		cert *x509.Certificate
		err  error
	}
	answers := make([]answer, 2)
	var wg sync.WaitGroup
	for i, e := range []*edgeProc{edgeB, edgeA} {
		wg.Go(func() {
			var a answer
			a.body, a.cert, a.err = tlsGet(ctx, e.https, "www.shop.test", roots)
			answers[i] = a
		})
	}
	wg.Wait()
	for i, a := range answers {
		if a.err != nil {
			t.Fatalf("edge %d: %v\npebble:\n%s", i, a.err, pebble.Log())
		}
		if a.body != "shop at www.shop.test via https" {
			t.Errorf("edge %d answered %q", i, a.body)
		}
	}
	if answers[0].cert.SerialNumber.Cmp(answers[1].cert.SerialNumber) != 0 {
		t.Errorf("the edges serve different certificates: serials %s and %s", answers[0].cert.SerialNumber, answers[1].cert.SerialNumber)
	}
	if n := pebble.Orders("www.shop.test"); n != 1 {
		t.Errorf("pebble saw %d orders for www.shop.test, want 1", n)
	}

	// A hostname that resolves here but that no Route claims: no
	// certificate, no order.
	for _, e := range []*edgeProc{edgeA, edgeB} {
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 30 * time.Second}, "tcp", fmt.Sprintf("127.0.0.1:%d", e.https),
			&tls.Config{ServerName: "evil.shop.test", RootCAs: roots})
		if err == nil {
			conn.Close()
			t.Errorf("%s completed a TLS handshake for unclaimed evil.shop.test", e.name)
		}
	}
	if n := pebble.Orders("evil.shop.test"); n != 0 {
		t.Errorf("pebble saw %d orders for the unclaimed evil.shop.test", n)
	}

	// The Route controller reads the outcome from the shared storage.
	waitRoute(t, kube, "www-shop-test", platformv1alpha1.RouteCertificateReadyCondition, platformv1alpha1.RouteCertificateIssuedReason)
	waitRoute(t, kube, "www-shop-test", platformv1alpha1.RouteReadyCondition, platformv1alpha1.RouteServingReason)

	// A Route whose hostname does not point here: the first handshake
	// places an order, the challenge fails, and the Route says why.
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 90 * time.Second}, "tcp", fmt.Sprintf("127.0.0.1:%d", edgeB.https),
		&tls.Config{ServerName: "dark.shop.test", RootCAs: roots})
	if err == nil {
		conn.Close()
		t.Fatal("TLS handshake for dark.shop.test succeeded without a DNS record")
	}
	dark := waitRoute(t, kube, "dark-shop-test", platformv1alpha1.RouteCertificateReadyCondition, platformv1alpha1.RouteChallengeFailedReason)
	if c := meta.FindStatusCondition(dark.Status.Conditions, platformv1alpha1.RouteCertificateReadyCondition); !strings.Contains(c.Message, "dark.shop.test") {
		t.Errorf("ChallengeFailed message does not carry the CA's answer about the name: %q", c.Message)
	}
	dns := meta.FindStatusCondition(dark.Status.Conditions, platformv1alpha1.RouteDNSReadyCondition)
	if dns == nil || dns.Reason != platformv1alpha1.RouteDNSNotPointingHereReason {
		t.Errorf("DNSReady of dark.shop.test = %+v, want %s", dns, platformv1alpha1.RouteDNSNotPointingHereReason)
	}
	t.Logf("dark.shop.test: %s; %s", dns.Message, meta.FindStatusCondition(dark.Status.Conditions, platformv1alpha1.RouteCertificateReadyCondition).Message)

	// Plain HTTP redirects to the HTTPS port.
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/cart?x=1", edgeB.http), nil)
	req.Host = "www.shop.test"
	resp, err := noFollow.Do(req)
	must(t, err)
	resp.Body.Close()
	if want := "https://www.shop.test:" + strconv.Itoa(httpsB) + "/cart?x=1"; resp.StatusCode != http.StatusPermanentRedirect || resp.Header.Get("Location") != want {
		t.Errorf("HTTP answered %d %q, want 308 %q", resp.StatusCode, resp.Header.Get("Location"), want)
	}

	// The metrics count the route's requests.
	resp, err = http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", edgeA.metricsPort))
	must(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `bex_edge_requests_total{app="shop",class="2xx",host="www.shop.test",tenant="acme"} 1`) {
		t.Errorf("edge A's metrics lack the route's request:\n%s", grepLines(string(body), "bex_edge_requests_total"))
	}
}

// must ends the test on err.
func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// startCluster starts a real apiserver and makes a database for the edge
// under test, with a client that knows the platform's kinds and
// EndpointSlices.
func startCluster(t *testing.T) (*controlplane.ControlPlane, string, *runtime.Scheme, client.Client) {
	t.Helper()
	cp := cptest.Start(t)
	dbURL := pgtest.NewDatabase(t)
	scheme := controllers.NewScheme()
	if err := discoveryv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	kc, err := client.New(cp.RESTConfig(), client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return cp, dbURL, scheme, kc
}

// serveApp runs an app answering with handler until the test ends, on the
// machine's own address: EndpointSlices refuse loopback addresses, and a
// pod listens on its own address too.
func serveApp(t *testing.T, handler http.HandlerFunc) (string, int32) {
	t.Helper()
	app := &http.Server{Handler: handler}
	ip := hostIP(t)
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = app.Serve(l) }()
	t.Cleanup(func() { app.Close() })
	return ip, int32(l.Addr().(*net.TCPAddr).Port)
}

// hostIP returns a non-loopback IPv4 address of this machine.
func hostIP(t *testing.T) string {
	t.Helper()
	ifaces, err := net.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	for _, ifc := range ifaces {
		if ifc.Flags&net.FlagUp == 0 || ifc.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, _ := ifc.Addrs()
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() {
				return n.IP.String()
			}
		}
	}
	t.Fatal("this machine has no non-loopback IPv4 address for the test app (EndpointSlices refuse loopback addresses)")
	return ""
}

// startRouteController runs the platform's controllers against the test's
// apiserver, with the real DNS of the test (pebble's challtestsrv) and the
// edges' certificate storage.
func startRouteController(ctx context.Context, t *testing.T, cfg *rest.Config, scheme *runtime.Scheme, dbURL string, pebble *acmetest.Pebble) {
	t.Helper()
	st, err := store.Open(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	storage, err := certstore.New(st.Pool(), certstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	resolver := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, pebble.DNSAddr())
	}}
	// Tests of the package each run a manager of the platform's controllers.
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		Controller: config.Controller{SkipNameValidation: ptr.To(true)}})
	if err != nil {
		t.Fatal(err)
	}
	if err := controllers.Setup(mgr, controllers.Deps{
		DNS: resolver, EdgeAddresses: []string{"127.0.0.1"}, AppDomain: "apps.test",
		Certificates: &edge.Certificates{Storage: storage, IssuerKeys: []string{edge.ACMEIssuerKey(pebble.DirectoryURL())}},
	}); err != nil {
		t.Fatal(err)
	}
	mctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("controller manager: %v", err)
		}
	})
}

// waitRoute waits until the Route's condition has reason, and returns it.
func waitRoute(t *testing.T, kube client.Client, name, condition, reason string) *platformv1alpha1.Route {
	t.Helper()
	r := &platformv1alpha1.Route{}
	platformtest.Eventually(t, 10*time.Minute, fmt.Sprintf("Route %s %s=%s", name, condition, reason), func(ctx context.Context) error {
		if err := kube.Get(ctx, client.ObjectKey{Namespace: "acme", Name: name}, r); err != nil {
			return err
		}
		return platformtest.HasCondition(r.Status.Conditions, condition, "", reason)
	})
	return r
}

// httpStatus GETs url and returns the answer's status.
func httpStatus(ctx context.Context, url string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
