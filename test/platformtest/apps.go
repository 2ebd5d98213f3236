package platformtest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"testing"
	"time"
)

// AppClient returns a client for apps behind the embedded platform's edge,
// as a user with .bex/env sourced reaches them: it trusts the local CA
// (BEX_CA) and connects to the edge's HTTPS port (BEX_HTTPS) whatever the
// hostname, sending it as SNI and Host. It does not follow redirects.
func AppClient(t testing.TB, env map[string]string) *http.Client {
	t.Helper()
	pem, err := os.ReadFile(env["BEX_CA"])
	if err != nil {
		t.Fatalf("reading BEX_CA: %v", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		t.Fatalf("BEX_CA %s holds no certificate", env["BEX_CA"])
	}
	u, err := url.Parse(env["BEX_HTTPS"])
	if err != nil || u.Host == "" {
		t.Fatalf("BEX_HTTPS %q is not a URL", env["BEX_HTTPS"])
	}
	edgeAddr := u.Host
	tr := &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, network, edgeAddr)
		},
		TLSClientConfig:     &tls.Config{RootCAs: roots},
		ForceAttemptHTTP2:   true,
		MaxIdleConnsPerHost: 64,
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// GetApp asks c for https://host/ and returns the status and body.
func GetApp(ctx context.Context, c *http.Client, host string) (int, string, error) {
	return GetAppPath(ctx, c, host, "/")
}

// GetAppPath asks c for https://host + path and returns the status and
// body.
func GetAppPath(ctx context.Context, c *http.Client, host, path string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+host+path, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}
