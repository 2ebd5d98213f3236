package controlplane

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"bex.co/bex/internal/childproc"
	"bex.co/bex/internal/kubebin"
)

// TestPlainEtcdDataDirStarts starts a data directory written the way the
// plane did before etcd required certificates (plain HTTP for clients and
// peers, no etcd certificates): the plane issues them, etcd serves the old
// data over TLS, and the apiserver starts on it.
func TestPlainEtcdDataDirStarts(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	bins, err := kubebin.NewBuilder(kubebin.Options{Progress: os.Stderr})
	if err != nil {
		t.Fatal(err)
	}
	etcdPath, err := bins.Etcd(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, d := range []string{"logs", "etcd"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	ports, err := childproc.FreePorts("127.0.0.1", 2)
	if err != nil {
		t.Fatal(err)
	}
	plain := "http://127.0.0.1:" + itoa(ports[0])
	peer := "http://127.0.0.1:" + itoa(ports[1])
	old, err := childproc.Start(childproc.Options{Name: "etcd", LogFile: filepath.Join(dir, "logs", "etcd.log"), Args: []string{etcdPath,
		"--name=bex", "--data-dir=" + filepath.Join(dir, "etcd"),
		"--listen-client-urls=" + plain, "--advertise-client-urls=" + plain,
		"--listen-peer-urls=" + peer, "--initial-advertise-peer-urls=" + peer, "--initial-cluster=bex=" + peer,
		"--unsafe-no-fsync=true", "--log-level=warn",
	}})
	if err != nil {
		t.Fatal(err)
	}
	if err := old.WaitReady(ctx, "etcd", 200*time.Millisecond, func(ctx context.Context) error { return childproc.HTTPOK(ctx, http.DefaultClient, plain+"/health") }); err != nil {
		old.Kill()
		t.Fatal(err)
	}
	key := base64.StdEncoding.EncodeToString([]byte("/kept"))
	put, _ := json.Marshal(map[string]string{"key": key, "value": base64.StdEncoding.EncodeToString([]byte("yes"))})
	resp, err := http.Post(plain+"/v3/kv/put", "application/json", bytes.NewReader(put))
	if err != nil || resp.StatusCode != http.StatusOK {
		old.Kill()
		t.Fatalf("writing to the plain etcd: %v %v", resp, err)
	}
	resp.Body.Close()
	old.Stop(10 * time.Second)
	state, _ := json.Marshal(map[string]any{"etcdClientPort": ports[0], "etcdPeerPort": ports[1]})
	if err := os.WriteFile(filepath.Join(dir, "state.json"), state, 0o600); err != nil {
		t.Fatal(err)
	}

	cp, err := Start(ctx, Options{DataDir: dir, Binaries: bins, Log: os.Stderr, APIServers: []APIServerSpec{{Version: "1.36.3"}}})
	if err != nil {
		t.Fatalf("starting on the plain data directory: %v", err)
	}
	defer cp.Stop()
	for _, f := range []string{"etcd-ca.crt", "etcd-server.crt", "etcd-peer.crt", "etcd-client.crt"} {
		if _, err := os.Stat(filepath.Join(dir, "pki", f)); err != nil {
			t.Errorf("%s was not issued: %v", f, err)
		}
	}
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: cp.EtcdTLSConfig()}}
	rng, _ := json.Marshal(map[string]string{"key": key})
	resp, err = client.Post(cp.EtcdURL()+"/v3/kv/range", "application/json", bytes.NewReader(rng))
	if err != nil {
		t.Fatalf("reading over TLS: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var got struct {
		KVs []struct{ Value string } `json:"kvs"`
	}
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.KVs) != 1 || got.KVs[0].Value != base64.StdEncoding.EncodeToString([]byte("yes")) {
		t.Fatalf("the key written before the upgrade reads %s", body)
	}
	resp, err = client.Post(cp.EtcdURL()+"/v3/cluster/member/list", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	members, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := `"https://127.0.0.1:` + itoa(ports[1]) + `"`; !strings.Contains(string(members), want) || strings.Contains(string(members), "http://") {
		t.Errorf("etcd members after the upgrade: %s; want the peer URL %s only", members, want)
	}
	if _, err := http.Get(plain + "/health"); err == nil {
		t.Error("etcd still answers plain HTTP")
	}
}
