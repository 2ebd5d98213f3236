package controlplane_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"bex.co/bex/internal/controlplane"
	"bex.co/bex/internal/controlplane/cptest"
)

// TestEtcdRequiresClientCertificate is what a process on the machine (a
// tenant's, say) gets from etcd: nothing over plain HTTP, nothing over TLS
// without a certificate or with one of the cluster CA (which UserConfig hands
// out, here even in system:masters). Only the etcd client certificate, the
// apiservers', is served; and the apiserver works with it.
func TestEtcdRequiresClientCertificate(t *testing.T) {
	cp := cptest.StartBare(t, controlplane.APIServerSpec{Version: "1.36.3"})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if !strings.HasPrefix(cp.EtcdURL(), "https://127.0.0.1:") {
		t.Fatalf("EtcdURL = %s, want https on loopback", cp.EtcdURL())
	}
	caFile, _, _ := cp.EtcdClient()
	caPEM, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	etcdCA := x509.NewCertPool()
	etcdCA.AppendCertsFromPEM(caPEM)
	master, err := cp.UserConfig("intruder", "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	masterCert, err := tls.X509KeyPair(master.CertData, master.KeyData)
	if err != nil {
		t.Fatal(err)
	}
	health := func(scheme string, cfg *tls.Config) (int, error) {
		c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
		url := scheme + strings.TrimPrefix(cp.EtcdURL(), "https") + "/health"
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := c.Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}

	for _, tc := range []struct {
		name   string
		scheme string
		cfg    *tls.Config
	}{
		{"plain HTTP", "http", nil},
		{"TLS without a certificate", "https", &tls.Config{RootCAs: etcdCA}},
		{"a system:masters certificate of the cluster CA", "https", &tls.Config{RootCAs: etcdCA, Certificates: []tls.Certificate{masterCert}}},
	} {
		code, err := health(tc.scheme, tc.cfg)
		if err == nil && code == http.StatusOK {
			t.Errorf("%s: etcd answered /health with 200", tc.name)
		} else {
			t.Logf("%s: refused (%d, %v)", tc.name, code, err)
		}
	}
	if code, err := health("https", cp.EtcdTLSConfig()); err != nil || code != http.StatusOK {
		t.Fatalf("with the etcd client certificate: %d, %v; want 200", code, err)
	}

	cs := kubernetes.NewForConfigOrDie(cp.RESTConfig())
	if _, err := cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "through-etcd"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("the apiserver cannot write to etcd: %v", err)
	}
}

// TestProcessIDs: EtcdPID and an APIServer's PID name the etcd and
// kube-apiserver processes themselves (not the unshare and sh that start
// an apiserver), whose memory a bench reads from /proc.
func TestProcessIDs(t *testing.T) {
	cp := cptest.StartBare(t)
	for _, tc := range []struct {
		what string
		pid  int
		comm string
	}{
		{"EtcdPID", cp.EtcdPID(), "etcd"},
		{"APIServers()[0].PID", cp.APIServers()[0].PID(), "kube-apiserver"},
	} {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(tc.pid) + "/comm")
		if err != nil {
			t.Fatalf("%s = %d: %v", tc.what, tc.pid, err)
		}
		if got := strings.TrimSpace(string(b)); got != tc.comm {
			t.Errorf("%s = %d, a process named %q, want %q", tc.what, tc.pid, got, tc.comm)
		}
	}
}
