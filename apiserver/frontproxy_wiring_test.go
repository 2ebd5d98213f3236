package apiserver

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	genericapiserver "k8s.io/apiserver/pkg/server"
	genericoptions "k8s.io/apiserver/pkg/server/options"

	"bex.co/bex/apiserver/frontproxy"
	"bex.co/bex/internal/pki"
)

// TestFrontProxyVerificationIsCachedInTheDelegatingChain builds the
// authenticator as Config does (the generic server's delegating options
// with a requestheader CA file, then cacheFrontProxyVerification) and
// checks the front proxy is authenticated by the caching authenticator
// while any other certificate still meets the delegating chain: refused
// with its error, as before.
func TestFrontProxyVerificationIsCachedInTheDelegatingChain(t *testing.T) {
	ca, err := pki.NewCA(pki.Spec{CommonName: "front-proxy-ca", NotAfter: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(t.TempDir(), "front-proxy-ca.crt")
	if err := os.WriteFile(caFile, ca.CertPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	o := genericoptions.NewDelegatingAuthenticationOptions()
	o.RemoteKubeConfigFileOptional = true
	o.SkipInClusterLookup = true
	o.RequestHeader.ClientCAFile = caFile
	o.RequestHeader.AllowedNames = []string{"front-proxy-client"}
	var authn genericapiserver.AuthenticationInfo
	if err := o.ApplyTo(&authn, &genericapiserver.SecureServingInfo{}, nil); err != nil {
		t.Fatal(err)
	}
	if err := cacheFrontProxyVerification(&authn); err != nil {
		t.Fatal(err)
	}
	if _, ok := authn.Authenticator.(*frontproxy.Authenticator); !ok {
		t.Fatalf("authenticator is %T, want the front-proxy cache in front", authn.Authenticator)
	}

	request := func(signer *pki.KeyPair, cn string) *http.Request {
		kp, err := signer.Issue(pki.Spec{CommonName: cn, NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
		if err != nil {
			t.Fatal(err)
		}
		req := httptest.NewRequest(http.MethodGet, "/apis", nil)
		req.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{kp.Cert}}
		req.Header.Set("X-Remote-User", "alice")
		return req
	}
	other, err := pki.NewCA(pki.Spec{CommonName: "other-ca", NotAfter: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		req  *http.Request
		want string // "" wants a refusal
	}{
		{"front proxy", request(ca, "front-proxy-client"), "alice"},
		{"name not allowed", request(ca, "mallory"), ""},
		{"other CA", request(other, "front-proxy-client"), ""},
	} {
		resp, ok, err := authn.Authenticator.AuthenticateRequest(tc.req)
		switch {
		case tc.want == "" && (ok || err == nil):
			t.Errorf("%s: authenticated %v (%+v), want refused with an error", tc.name, ok, resp)
		case tc.want != "" && (err != nil || !ok || resp.User.GetName() != tc.want):
			t.Errorf("%s: authenticated %v as %+v (%v), want %s", tc.name, ok, resp, err, tc.want)
		}
	}
}
