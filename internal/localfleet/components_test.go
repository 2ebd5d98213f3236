package localfleet

import (
	"context"
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"bex.co/bex/internal/pki"
)

// A machine's directory written before machines ran kube-controller-manager
// and kube-scheduler has no flags for them: its next start makes them and
// their kubeconfigs.
func TestOldMachineStateGetsComponents(t *testing.T) {
	block := netip.MustParsePrefix("127.77.3.0/24")
	c := &Cluster{spec: ClusterSpec{Namespace: "default", Name: "local-1", Block: block}, dir: t.TempDir()}
	m := &Machine{c: c, spec: MachineSpec{Name: "local-1-cp-a", Version: "1.36.3"}, ip: blockAddr(block, 11),
		dir: filepath.Join(c.dir, "machines", "local-1-cp-a")}
	certDir := filepath.Join(m.root(), "etc", "kubernetes", "pki")
	if err := os.MkdirAll(certDir, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"ca", "front-proxy-ca"} {
		ca, err := pki.NewCA(pki.Spec{CommonName: name, NotAfter: time.Now().Add(time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		if err := (pki.Files{CertFile: filepath.Join(certDir, name+".crt"), KeyFile: filepath.Join(certDir, name+".key")}).Write(ca); err != nil {
			t.Fatal(err)
		}
	}
	old := map[string]any{
		"version": "1.36.3", "init": true, "args": []string{"--bind-address=127.77.3.11"}, "certDir": "/etc/kubernetes/pki",
		"clusterConfiguration": "apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\netcd:\n  external:\n    endpoints: [https://127.77.3.2:2379]\n",
	}
	data, _ := json.Marshal(old)
	if err := os.WriteFile(m.statePath(), data, 0o600); err != nil {
		t.Fatal(err)
	}

	if err := m.prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(m.root(), "etc", "kubernetes", "controller-manager.conf")
	if !slices.Contains(m.st.ComponentArgs["kube-controller-manager"], "--kubeconfig="+kubeconfig) {
		t.Errorf("kube-controller-manager's flags: %q", m.st.ComponentArgs["kube-controller-manager"])
	}
	var saved machineState
	if data, err := os.ReadFile(m.statePath()); err != nil || json.Unmarshal(data, &saved) != nil {
		t.Fatalf("reading the state again: %v", err)
	}
	if len(saved.ComponentArgs["kube-scheduler"]) == 0 || !slices.Equal(saved.Args, []string{"--bind-address=127.77.3.11"}) {
		t.Errorf("the state kept: args %q, component args %q", saved.Args, saved.ComponentArgs)
	}
	for _, c := range componentsBesideAPIServer {
		path := filepath.Join(m.root(), "etc", "kubernetes", c.kubeconfig)
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v, want 0600", path, fi.Mode().Perm())
		}
		cfg, err := clientcmd.BuildConfigFromFlags("", path)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Host != "https://127.77.3.11:6443" {
			t.Errorf("%s names %s, want the machine's own kube-apiserver", path, cfg.Host)
		}
		kp, err := pki.ParseKeyPair(cfg.CertData, cfg.KeyData)
		if err != nil {
			t.Fatal(err)
		}
		if kp.Cert.Subject.CommonName != c.user {
			t.Errorf("%s is %s's, want %s's", path, kp.Cert.Subject.CommonName, c.user)
		}
	}
}
