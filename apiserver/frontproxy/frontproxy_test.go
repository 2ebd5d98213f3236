package frontproxy_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/authenticatorfactory"
	"k8s.io/apiserver/pkg/authentication/request/headerrequest"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	clocktesting "k8s.io/utils/clock/testing"

	"bex.co/bex/apiserver/frontproxy"
	"bex.co/bex/internal/pki"
)

const proxyName = "front-proxy-client"

// fixture is a requestheader client-CA in a file, as the kube-apiserver's
// is, a front-proxy authenticator over k8s.io/apiserver's own delegating
// chain, and a TLS server that answers with the user it authenticated.
type fixture struct {
	t       *testing.T
	caFile  string
	ca      *dynamiccertificates.DynamicFileCAContent
	allowed atomic.Pointer[[]string]
	rh      *authenticatorfactory.RequestHeaderConfig
	// verifications counts the chain verifications of the front-proxy
	// authenticator.
	verifications atomic.Int32
	auth          *frontproxy.Authenticator
	srv           *httptest.Server
}

type answer struct {
	Status int `json:"-"`
	Name   string
	Groups []string
	Extra  map[string][]string
}

func newCA(t testing.TB) *pki.KeyPair {
	t.Helper()
	ca, err := pki.NewCA(pki.Spec{CommonName: "front-proxy-ca", NotAfter: time.Now().Add(24 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

func issue(t testing.TB, ca *pki.KeyPair, cn string, notBefore, notAfter time.Time) tls.Certificate {
	t.Helper()
	kp, err := ca.Issue(pki.Spec{CommonName: cn, NotBefore: notBefore, NotAfter: notAfter, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	if err != nil {
		t.Fatal(err)
	}
	return kp.TLSCertificate()
}

func proxyCert(t testing.TB, ca *pki.KeyPair) tls.Certificate {
	return issue(t, ca, proxyName, time.Time{}, time.Now().Add(time.Hour))
}

// newFixture trusts ca; o's Verify is wrapped to count. next nil means the
// delegating chain k8s.io/apiserver builds from the same config.
func newFixture(t *testing.T, ca *pki.KeyPair, o frontproxy.Options, next authenticator.Request) *fixture {
	t.Helper()
	f := &fixture{t: t, caFile: filepath.Join(t.TempDir(), "requestheader-ca.crt")}
	if err := os.WriteFile(f.caFile, ca.CertPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	provider, err := dynamiccertificates.NewDynamicCAContentFromFile("requestheader-client-ca", f.caFile)
	if err != nil {
		t.Fatal(err)
	}
	f.ca = provider
	names := []string{proxyName}
	f.allowed.Store(&names)
	f.rh = &authenticatorfactory.RequestHeaderConfig{
		UsernameHeaders:     headerrequest.StaticStringSlice{"X-Remote-User"},
		UIDHeaders:          headerrequest.StaticStringSlice{"X-Remote-Uid"},
		GroupHeaders:        headerrequest.StaticStringSlice{"X-Remote-Group"},
		ExtraHeaderPrefixes: headerrequest.StaticStringSlice{"X-Remote-Extra-"},
		CAContentProvider:   provider,
		AllowedClientNames:  headerrequest.StringSliceProviderFunc(func() []string { return *f.allowed.Load() }),
	}
	if next == nil {
		next = delegating(t, f.rh)
	}
	verify := o.Verify
	if verify == nil {
		verify = (*x509.Certificate).Verify
	}
	o.Verify = func(c *x509.Certificate, opts x509.VerifyOptions) ([][]*x509.Certificate, error) {
		f.verifications.Add(1)
		return verify(c, opts)
	}
	f.auth, err = frontproxy.New(f.rh, next, o)
	if err != nil {
		t.Fatal(err)
	}
	f.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		resp, ok, err := f.auth.AuthenticateRequest(r)
		if err != nil || !ok {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		_ = json.NewEncoder(w).Encode(answer{Name: resp.User.GetName(), Groups: resp.User.GetGroups(), Extra: resp.User.GetExtra()})
	}))
	// As the generic server does: ask for a certificate, let the
	// authenticators verify it.
	f.srv.TLS = &tls.Config{ClientAuth: tls.RequestClientCert}
	f.srv.StartTLS()
	t.Cleanup(f.srv.Close)
	return f
}

// delegating is the chain the generic server builds for a request-header
// config, without token review or client certificates.
func delegating(t testing.TB, rh *authenticatorfactory.RequestHeaderConfig) authenticator.Request {
	t.Helper()
	next, _, err := authenticatorfactory.DelegatingAuthenticatorConfig{RequestHeaderConfig: rh}.New()
	if err != nil {
		t.Fatal(err)
	}
	return next
}

// client returns an HTTP client presenting cert on connections it reuses,
// as the aggregator does.
func (f *fixture) client(cert tls.Certificate) *http.Client {
	tr := f.srv.Client().Transport.(*http.Transport).Clone()
	tr.TLSClientConfig.Certificates = []tls.Certificate{cert}
	f.t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

func (f *fixture) get(c *http.Client, user string, groups ...string) answer {
	f.t.Helper()
	req, err := http.NewRequest(http.MethodGet, f.srv.URL, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	req.Header.Set("X-Remote-User", user)
	for _, g := range groups {
		req.Header.Add("X-Remote-Group", g)
	}
	req.Header.Set("X-Remote-Extra-Scopes", "review")
	resp, err := c.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	var a answer
	if resp.StatusCode == http.StatusOK {
		if err := json.NewDecoder(resp.Body).Decode(&a); err != nil {
			f.t.Fatal(err)
		}
	}
	a.Status = resp.StatusCode
	return a
}

func (f *fixture) rotate(ca *pki.KeyPair) {
	f.t.Helper()
	if err := os.WriteFile(f.caFile, ca.CertPEM(), 0o600); err != nil {
		f.t.Fatal(err)
	}
	if err := f.ca.RunOnce(context.Background()); err != nil {
		f.t.Fatal(err)
	}
}

func wantStatus(t *testing.T, a answer, status int, what string) {
	t.Helper()
	if a.Status != status {
		t.Fatalf("%s: status %d, want %d", what, a.Status, status)
	}
}

func TestSecondRequestIsNotVerifiedAgainButReadsItsHeaders(t *testing.T) {
	ca := newCA(t)
	f := newFixture(t, ca, frontproxy.Options{}, nil)
	c := f.client(proxyCert(t, ca))

	a := f.get(c, "alice", "team-a")
	wantStatus(t, a, http.StatusOK, "first request")
	if a.Name != "alice" || !slices.Equal(a.Groups, []string{"team-a", "system:authenticated"}) || !slices.Equal(a.Extra["scopes"], []string{"review"}) {
		t.Fatalf("first request authenticated as %+v", a)
	}
	a = f.get(c, "bob")
	wantStatus(t, a, http.StatusOK, "second request")
	if a.Name != "bob" || !slices.Equal(a.Groups, []string{"system:authenticated"}) {
		t.Fatalf("second request authenticated as %+v, want bob from its own headers", a)
	}
	// A new connection with the same certificate hits the cache too.
	wantStatus(t, f.get(f.client(proxyCert(t, ca)), "carol"), http.StatusOK, "other certificate")
	if n := f.verifications.Load(); n != 2 {
		t.Fatalf("%d verifications for 3 requests with 2 certificates, want 2", n)
	}
}

func TestCertificateOfRotatedOutCAIsRefused(t *testing.T) {
	oldCA, newCA := newCA(t), newCA(t)
	f := newFixture(t, oldCA, frontproxy.Options{}, nil)
	old := f.client(proxyCert(t, oldCA))
	wantStatus(t, f.get(old, "alice"), http.StatusOK, "before rotation")
	wantStatus(t, f.get(old, "alice"), http.StatusOK, "before rotation, cached")

	f.rotate(newCA)
	wantStatus(t, f.get(old, "alice"), http.StatusUnauthorized, "old CA's certificate after rotation")
	wantStatus(t, f.get(f.client(proxyCert(t, newCA)), "alice"), http.StatusOK, "new CA's certificate")
}

func TestUntrustedOrExpiredCertificateIsRefusedEveryTime(t *testing.T) {
	ca := newCA(t)
	f := newFixture(t, ca, frontproxy.Options{}, nil)
	stranger := f.client(proxyCert(t, newCA(t)))
	expired := f.client(issue(t, ca, proxyName, time.Now().Add(-2*time.Hour), time.Now().Add(-time.Hour)))
	for i := range 2 {
		wantStatus(t, f.get(stranger, "alice"), http.StatusUnauthorized, "certificate of another CA")
		wantStatus(t, f.get(expired, "alice"), http.StatusUnauthorized, "expired certificate")
		if n := f.verifications.Load(); n != int32(2*(i+1)) {
			t.Fatalf("%d verifications after %d rounds, want %d: a failure must be verified again", n, i+1, 2*(i+1))
		}
	}
}

func TestNameNotAllowedIsRefused(t *testing.T) {
	ca := newCA(t)
	f := newFixture(t, ca, frontproxy.Options{}, nil)
	wantStatus(t, f.get(f.client(issue(t, ca, "mallory", time.Time{}, time.Now().Add(time.Hour))), "alice"),
		http.StatusUnauthorized, "certificate named mallory")

	c := f.client(proxyCert(t, ca))
	wantStatus(t, f.get(c, "alice"), http.StatusOK, "allowed proxy")
	names := []string{"another-proxy"}
	f.allowed.Store(&names)
	wantStatus(t, f.get(c, "alice"), http.StatusUnauthorized, "cached proxy no longer allowed")
}

func TestEntryEndsAtNotAfterOrTTL(t *testing.T) {
	ca := newCA(t)
	clk := clocktesting.NewFakePassiveClock(time.Now())
	// Behind it, a chain that refuses all: what this authenticator
	// decides itself shows.
	refuse := authenticator.RequestFunc(func(*http.Request) (*authenticator.Response, bool, error) { return nil, false, nil })
	f := newFixture(t, ca, frontproxy.Options{Clock: clk, TTL: time.Minute}, refuse)

	short := f.client(issue(t, ca, proxyName, time.Time{}, clk.Now().Add(30*time.Second)))
	long := f.client(proxyCert(t, ca))
	wantStatus(t, f.get(short, "alice"), http.StatusOK, "short-lived certificate")
	wantStatus(t, f.get(long, "alice"), http.StatusOK, "long-lived certificate")

	clk.SetTime(clk.Now().Add(45 * time.Second))
	wantStatus(t, f.get(short, "alice"), http.StatusUnauthorized, "short-lived certificate past its NotAfter")
	wantStatus(t, f.get(long, "alice"), http.StatusOK, "long-lived certificate within the TTL")
	if n := f.verifications.Load(); n != 3 {
		t.Fatalf("%d verifications, want 3 (the expired one again only)", n)
	}
	clk.SetTime(clk.Now().Add(30 * time.Second))
	wantStatus(t, f.get(long, "alice"), http.StatusOK, "long-lived certificate after the TTL")
	if n := f.verifications.Load(); n != 4 {
		t.Fatalf("%d verifications, want 4 (the long-lived one again after the TTL)", n)
	}
}

func TestCacheIsBounded(t *testing.T) {
	ca := newCA(t)
	f := newFixture(t, ca, frontproxy.Options{Size: 2}, nil)
	var clients []*http.Client
	for range 3 {
		clients = append(clients, f.client(proxyCert(t, ca)))
	}
	for i, c := range clients {
		wantStatus(t, f.get(c, "alice"), http.StatusOK, "first round")
		if n := f.verifications.Load(); n != int32(i+1) {
			t.Fatalf("%d verifications after %d certificates", n, i+1)
		}
	}
	wantStatus(t, f.get(clients[2], "alice"), http.StatusOK, "most recent certificate")
	if n := f.verifications.Load(); n != 3 {
		t.Fatalf("%d verifications, want the most recent certificate still cached", n)
	}
	wantStatus(t, f.get(clients[0], "alice"), http.StatusOK, "oldest certificate")
	if n := f.verifications.Load(); n != 4 {
		t.Fatalf("%d verifications, want the oldest certificate evicted and verified again", n)
	}
}

func TestIncompleteConfigIsRefused(t *testing.T) {
	ca := newCA(t)
	f := newFixture(t, ca, frontproxy.Options{}, nil)
	if _, err := frontproxy.New(&authenticatorfactory.RequestHeaderConfig{}, delegating(t, f.rh), frontproxy.Options{}); err == nil {
		t.Fatal("empty request-header config accepted")
	}
	if _, err := frontproxy.New(f.rh, nil, frontproxy.Options{}); err == nil {
		t.Fatal("missing delegating authenticator accepted")
	}
}

// BenchmarkFrontProxy authenticates an aggregator request with k8s.io/apiserver's
// delegating chain alone (uncached: the chain verified every time) and with
// the front-proxy authenticator in front of it (cached), one after the other
// in each iteration so that both see the same load; it reports both and
// their ratio.
func BenchmarkFrontProxy(b *testing.B) {
	ca := newCA(b)
	provider, err := dynamiccertificates.NewStaticCAContent("requestheader-client-ca", ca.CertPEM())
	if err != nil {
		b.Fatal(err)
	}
	rh := &authenticatorfactory.RequestHeaderConfig{
		UsernameHeaders:     headerrequest.StaticStringSlice{"X-Remote-User"},
		UIDHeaders:          headerrequest.StaticStringSlice{"X-Remote-Uid"},
		GroupHeaders:        headerrequest.StaticStringSlice{"X-Remote-Group"},
		ExtraHeaderPrefixes: headerrequest.StaticStringSlice{"X-Remote-Extra-"},
		CAContentProvider:   provider,
		AllowedClientNames:  headerrequest.StaticStringSlice{proxyName},
	}
	uncached := delegating(b, rh)
	cached, err := frontproxy.New(rh, uncached, frontproxy.Options{})
	if err != nil {
		b.Fatal(err)
	}
	state := &tls.ConnectionState{PeerCertificates: []*x509.Certificate{proxyCert(b, ca).Leaf}}
	authenticate := func(auth authenticator.Request) time.Duration {
		req := httptest.NewRequest(http.MethodPost, "/apis/scheduling.bex.co/v1alpha1/placementreviews", nil)
		req.TLS = state
		req.Header.Set("X-Remote-User", "system:serviceaccount:bex-system:bex-controller")
		req.Header.Add("X-Remote-Group", "system:serviceaccounts")
		start := time.Now()
		_, ok, err := auth.AuthenticateRequest(req)
		d := time.Since(start)
		if err != nil || !ok {
			b.Fatalf("refused: %v", err)
		}
		return d
	}
	var slow, fast time.Duration
	for b.Loop() {
		slow += authenticate(uncached)
		fast += authenticate(cached)
	}
	n := float64(b.N)
	b.ReportMetric(float64(slow.Nanoseconds())/n, "uncached-ns/req")
	b.ReportMetric(float64(fast.Nanoseconds())/n, "cached-ns/req")
	b.ReportMetric(float64(slow)/float64(fast), "ratio")
}
