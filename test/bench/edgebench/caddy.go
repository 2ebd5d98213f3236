package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"

	"bex.co/bex/internal/edge"
)

// issueProxyCert has ca sign a certificate for tlsHost with a P-256 key,
// the key type certmagic gives the edge, and writes it and its key to dir
// for the proxies to load.
func issueProxyCert(ctx context.Context, ca *edge.LocalCA, dir string) (certFile, keyFile string, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	csrDER, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{DNSNames: []string{tlsHost}}, key)
	if err != nil {
		return "", "", fmt.Errorf("creating a certificate request: %w", err)
	}
	csr, err := x509.ParseCertificateRequest(csrDER)
	if err != nil {
		return "", "", err
	}
	issued, err := ca.Issue(ctx, csr)
	if err != nil {
		return "", "", fmt.Errorf("issuing the proxies' certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return "", "", err
	}
	certFile, keyFile = filepath.Join(dir, "proxy.crt"), filepath.Join(dir, "proxy.key")
	if err := os.WriteFile(certFile, issued.Certificate, 0o600); err != nil {
		return "", "", err
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return "", "", err
	}
	return certFile, keyFile, nil
}

// caddyConfig is Caddy's JSON config: reverse_proxy to upstream on the
// listeners Caddy inherits as file descriptors 3 (plain HTTP/1.1) and 4
// (TLS, HTTP/1.1 and HTTP/2 like the edge, with the certificate in
// certFile). Config autosave and automatic HTTPS are off, and the admin
// endpoint too unless adminSocket names a unix socket for it (to fetch CPU
// profiles); only errors are logged and there is no access log.
func caddyConfig(upstream, certFile, keyFile, storageDir, adminSocket string) ([]byte, error) {
	type obj = map[string]any
	routes := []obj{{"handle": []obj{{"handler": "reverse_proxy", "upstreams": []obj{{"dial": upstream}}}}}}
	admin := obj{"disabled": true, "config": obj{"persist": false}}
	if adminSocket != "" {
		admin = obj{"listen": "unix/" + adminSocket, "config": obj{"persist": false}}
	}
	cfg := obj{
		"admin":   admin,
		"logging": obj{"logs": obj{"default": obj{"level": "ERROR"}}},
		"storage": obj{"module": "file_system", "root": storageDir},
		"apps": obj{
			"http": obj{"servers": obj{
				"plain": obj{
					"listen": []string{"fd/3"}, "protocols": []string{"h1"},
					"automatic_https": obj{"disable": true}, "routes": routes,
				},
				"tls": obj{
					"listen": []string{"fd/4"}, "protocols": []string{"h1", "h2"},
					"automatic_https":         obj{"disable": true},
					"tls_connection_policies": []obj{{}},
					"routes":                  routes,
				},
			}},
			"tls": obj{"certificates": obj{"load_files": []obj{{"certificate": certFile, "key": keyFile}}}},
		},
	}
	return json.MarshalIndent(cfg, "", "  ")
}

// caddyProfile fetches a CPU profile of seconds from Caddy's admin endpoint
// on socket and writes it to file.
func caddyProfile(ctx context.Context, socket string, seconds int, file string) error {
	c := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", socket)
		},
	}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://caddy/debug/pprof/profile?seconds="+strconv.Itoa(seconds), nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("fetching Caddy's CPU profile: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("fetching Caddy's CPU profile: %s", resp.Status)
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
