package localfleet

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// bootstrapInit is bootstrap data in the shape Cluster API's kubeadm
// bootstrap provider writes for the first control-plane machine (its
// cloud-config template: write_files, then runcmd with kubeadm init).
const bootstrapInit = `## template: jinja
#cloud-config

write_files:
-   path: /etc/kubernetes/pki/ca.crt
    owner: root:root
    permissions: '0640'
    content: |
      CA
-   path: /etc/kubernetes/pki/ca.key
    owner: root:root
    permissions: '0600'
    content: |
      KEY
-   path: /etc/kubernetes/pki/sa.pub
    encoding: "base64"
    owner: root:root
    permissions: '0640'
    content: |
      ` + "U0EgUFVC" + `
-   path: /run/kubeadm/kubeadm.yaml
    owner: root:root
    permissions: '0640'
    content: |
      ---
      apiServer:
        extraArgs:
        - name: peer-ca-file
          value: /etc/kubernetes/pki/ca.crt
        - name: authorization-mode
          value: RBAC
        - name: shutdown-delay-duration
          value: 0s
      apiVersion: kubeadm.k8s.io/v1beta4
      controlPlaneEndpoint: 127.77.3.1:6443
      etcd:
        external:
          caFile: /etc/kubernetes/pki/etcd/ca.crt
          certFile: /etc/kubernetes/pki/apiserver-etcd-client.crt
          endpoints:
          - https://127.77.3.2:2379
          keyFile: /etc/kubernetes/pki/apiserver-etcd-client.key
      kind: ClusterConfiguration
      kubernetesVersion: v1.36.3
      networking:
        serviceSubnet: 10.128.0.0/16
      ---
      apiVersion: kubeadm.k8s.io/v1beta4
      kind: InitConfiguration
      nodeRegistration:
        taints: []
runcmd:
  - 'kubeadm init --config /run/kubeadm/kubeadm.yaml  && echo success > /run/cluster-api/bootstrap-success.complete'
`

func TestBootstrapDataMakesKubeadmFlags(t *testing.T) {
	files, err := parseCloudConfig([]byte(bootstrapInit))
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	if err := writeFiles(root, files); err != nil {
		t.Fatal(err)
	}
	if data, err := os.ReadFile(filepath.Join(root, "etc/kubernetes/pki/sa.pub")); err != nil || string(data) != "SA PUB" {
		t.Errorf("base64 file: %q, %v", data, err)
	}
	if fi, err := os.Stat(filepath.Join(root, "etc/kubernetes/pki/ca.key")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("ca.key mode: %v, %v", fi.Mode(), err)
	}
	kc, err := readKubeadmConfig(files)
	if err != nil {
		t.Fatal(err)
	}
	if kc.Init == nil || kc.Join != nil {
		t.Fatalf("an init configuration read as %+v", kc)
	}
	if ts := kc.Init.NodeRegistration.nodeTaints(); len(ts) != 0 {
		t.Errorf("taints: [] gave %v, want none", ts)
	}
	args := apiServerArgs(kc.Cluster, root, "127.77.3.11", 6443)
	want := []string{
		"--advertise-address=127.77.3.11",
		"--bind-address=127.77.3.11",
		"--secure-port=6443",
		"--service-cluster-ip-range=10.128.0.0/16",
		"--etcd-servers=https://127.77.3.2:2379",
		"--etcd-cafile=" + filepath.Join(root, "etc/kubernetes/pki/etcd/ca.crt"),
		"--client-ca-file=" + filepath.Join(root, "etc/kubernetes/pki/ca.crt"),
		// extraArgs: a new flag with its path moved, an override, a value.
		"--peer-ca-file=" + filepath.Join(root, "etc/kubernetes/pki/ca.crt"),
		"--authorization-mode=RBAC",
		"--shutdown-delay-duration=0s",
		"--requestheader-allowed-names=front-proxy-client",
	}
	for _, w := range want {
		if !slices.Contains(args, w) {
			t.Errorf("flags lack %s:\n%s", w, strings.Join(args, "\n"))
		}
	}
	if slices.Contains(args, "--authorization-mode=Node,RBAC") {
		t.Error("extraArgs did not override kubeadm's authorization-mode")
	}
}

func TestBootstrapDataRefusals(t *testing.T) {
	for name, data := range map[string]string{
		"a path outside /":    "write_files:\n- path: ../etc/x\n  content: x\n",
		"an unknown encoding": "write_files:\n- path: /etc/x\n  encoding: rot13\n  content: x\n",
		"no kubeadm config":   "write_files:\n- path: /etc/x\n  content: x\n",
		"a worker's join":     "write_files:\n- path: /run/kubeadm/kubeadm-join-config.yaml\n  content: |\n    apiVersion: kubeadm.k8s.io/v1beta4\n    kind: JoinConfiguration\n    discovery:\n      bootstrapToken:\n        apiServerEndpoint: 127.77.3.1:6443\n        token: abc.def\n",
		"kubeadm v1beta3":     "write_files:\n- path: /run/kubeadm/kubeadm.yaml\n  content: |\n    apiVersion: kubeadm.k8s.io/v1beta3\n    kind: ClusterConfiguration\n",
		"no external etcd":    "write_files:\n- path: /run/kubeadm/kubeadm.yaml\n  content: |\n    apiVersion: kubeadm.k8s.io/v1beta4\n    kind: ClusterConfiguration\n    ---\n    apiVersion: kubeadm.k8s.io/v1beta4\n    kind: InitConfiguration\n",
	} {
		files, err := parseCloudConfig([]byte(data))
		if err == nil {
			_, err = readKubeadmConfig(files)
		}
		if err == nil {
			t.Errorf("%s: accepted", name)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
}

func TestGzipContent(t *testing.T) {
	// "hello" gzipped, then base64: what cloud-init's gz+b64 carries.
	const gz = "H4sIAAAAAAAA/8pIzcnJBwQAAP//hqYQNgUAAAA="
	if _, err := base64.StdEncoding.DecodeString(gz); err != nil {
		t.Fatal(err)
	}
	got, err := decodeContent("gzip+base64", gz)
	if err != nil || string(got) != "hello" {
		t.Errorf("gzip+base64: %q, %v", got, err)
	}
}
