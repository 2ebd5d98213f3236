package localfleet

import (
	"encoding/base64"
	"maps"
	"net/netip"
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

func TestCheckRole(t *testing.T) {
	const workerJoin = "write_files:\n- path: /run/kubeadm/kubeadm-join-config.yaml\n  content: |\n    apiVersion: kubeadm.k8s.io/v1beta4\n    kind: JoinConfiguration\n    discovery:\n      bootstrapToken:\n        apiServerEndpoint: 127.77.3.1:6443\n        token: abc.def\n"
	const controlPlaneJoin = workerJoin + "    controlPlane:\n      localAPIEndpoint:\n        bindPort: 6443\n"
	for _, c := range []struct {
		name, data string
		worker, ok bool
	}{
		{"a worker's join on a worker", workerJoin, true, true},
		{"a worker's join on a control-plane machine", workerJoin, false, false},
		{"a control-plane join on a control-plane machine", controlPlaneJoin, false, true},
		{"a control-plane join on a worker", controlPlaneJoin, true, false},
	} {
		files, err := parseCloudConfig([]byte(c.data))
		if err != nil {
			t.Fatal(err)
		}
		kc, err := readKubeadmConfig(files)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if err := kc.checkRole(c.worker); (err == nil) != c.ok {
			t.Errorf("%s: %v, want ok %v", c.name, err, c.ok)
		}
	}
}

// TestWorkerKubeletArgs: a worker's nodeRegistration, as CABPK writes it
// from a KubeadmConfigTemplate, becomes the node agent's flags as "kubeadm
// join" makes a worker kubelet's: the taints as --register-with-taints,
// kubeletExtraArgs' node-labels and register-with-taints as given (they
// override kubeadm's), no other kubelet flag; nil taints are none.
func TestWorkerKubeletArgs(t *testing.T) {
	const join = "apiVersion: kubeadm.k8s.io/v1beta4\nkind: JoinConfiguration\ndiscovery:\n  bootstrapToken:\n    apiServerEndpoint: 127.77.3.1:6443\n    token: abc.def\n"
	for _, c := range []struct {
		name, registration string
		want               []string
		labels             map[string]string
	}{
		{name: "none", registration: "", want: nil, labels: map[string]string{}},
		{name: "taints null", registration: "  taints: null\n", want: nil, labels: map[string]string{}},
		{name: "labels and taints", registration: "" +
			"  kubeletExtraArgs:\n" +
			"  - name: cloud-provider\n    value: external\n" +
			"  - name: node-labels\n    value: bex.co/pool=general,tier=web\n" +
			"  - name: node-labels\n    value: zone=a\n" +
			"  taints:\n" +
			"  - key: bex.co/dedicated\n    value: apps\n    effect: NoSchedule\n" +
			"  - key: spare\n    effect: PreferNoSchedule\n",
			want: []string{
				"--register-with-taints=bex.co/dedicated=apps:NoSchedule,spare:PreferNoSchedule",
				"--node-labels=bex.co/pool=general,tier=web",
				"--node-labels=zone=a",
			},
			labels: map[string]string{"bex.co/pool": "general", "tier": "web", "zone": "a"}},
		{name: "register-with-taints overrides the taints", registration: "" +
			"  kubeletExtraArgs:\n  - name: register-with-taints\n    value: a=b:NoExecute\n" +
			"  taints:\n  - key: bex.co/dedicated\n    effect: NoSchedule\n",
			want: []string{"--register-with-taints=a=b:NoExecute"}, labels: map[string]string{}},
	} {
		data := join
		if c.registration != "" {
			data += "nodeRegistration:\n" + c.registration
		}
		kc, err := parseKubeadmConfig([]byte(data))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := kc.Join.NodeRegistration.workerKubeletArgs(); !slices.Equal(got, c.want) {
			t.Errorf("%s: flags %q, want %q", c.name, got, c.want)
		}
		if got, err := kc.Join.NodeRegistration.nodeLabels(); err != nil || !maps.Equal(got, c.labels) {
			t.Errorf("%s: labels %v, %v; want %v", c.name, got, err, c.labels)
		}
	}
	bad := nodeRegistration{KubeletExtraArgs: []arg{{Name: "node-labels", Value: "a=b,c"}}}
	if _, err := bad.nodeLabels(); err == nil || !strings.Contains(err.Error(), `"c" is not KEY=VALUE`) {
		t.Errorf("node-labels a=b,c: %v", err)
	}
}

func TestComponentArgs(t *testing.T) {
	const root, ip = "/fleet/m-1/root", "127.77.3.11"
	under := func(p string) string { return filepath.Join(root, filepath.FromSlash(p)) }
	const etcd = "apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\netcd:\n  external:\n    endpoints: [https://127.77.3.2:2379]\n"
	const kcm, sched = "kube-controller-manager", "kube-scheduler"
	for _, c := range []struct {
		name    string
		cluster string // the ClusterConfiguration beyond its external etcd
		want    map[string][]string
		absent  map[string][]string // flags a component must not have
		healthz map[string]string
	}{{
		name: "kubeadm's defaults",
		want: map[string][]string{
			kcm: {
				"--bind-address=" + ip,
				"--leader-elect=true",
				"--kubeconfig=" + under("/etc/kubernetes/controller-manager.conf"),
				"--authentication-kubeconfig=" + under("/etc/kubernetes/controller-manager.conf"),
				"--authorization-kubeconfig=" + under("/etc/kubernetes/controller-manager.conf"),
				"--client-ca-file=" + under("/etc/kubernetes/pki/ca.crt"),
				"--requestheader-client-ca-file=" + under("/etc/kubernetes/pki/front-proxy-ca.crt"),
				"--root-ca-file=" + under("/etc/kubernetes/pki/ca.crt"),
				"--service-account-private-key-file=" + under("/etc/kubernetes/pki/sa.key"),
				"--cluster-signing-cert-file=" + under("/etc/kubernetes/pki/ca.crt"),
				"--cluster-signing-key-file=" + under("/etc/kubernetes/pki/ca.key"),
				"--use-service-account-credentials=true",
				"--controllers=*,bootstrapsigner,tokencleaner",
				"--cluster-name=kubernetes",
			},
			sched: {
				"--bind-address=" + ip,
				"--leader-elect=true",
				"--kubeconfig=" + under("/etc/kubernetes/scheduler.conf"),
				"--authentication-kubeconfig=" + under("/etc/kubernetes/scheduler.conf"),
				"--authorization-kubeconfig=" + under("/etc/kubernetes/scheduler.conf"),
			},
		},
		// Without a Pod subnet kubeadm allocates no Node CIDRs.
		absent:  map[string][]string{kcm: {"allocate-node-cidrs", "cluster-cidr", "service-cluster-ip-range"}},
		healthz: map[string]string{kcm: "https://127.77.3.11:10257/healthz", sched: "https://127.77.3.11:10259/healthz"},
	}, {
		name:    "a Pod subnet, a cluster name, a certificates dir",
		cluster: "clusterName: local-1\ncertificatesDir: /etc/pki\nnetworking:\n  podSubnet: 192.168.0.0/16\n  serviceSubnet: 10.128.0.0/16\n",
		want: map[string][]string{kcm: {
			"--allocate-node-cidrs=true",
			"--cluster-cidr=192.168.0.0/16",
			"--service-cluster-ip-range=10.128.0.0/16",
			"--cluster-name=local-1",
			"--cluster-signing-key-file=" + under("/etc/pki/ca.key"),
			"--service-account-private-key-file=" + under("/etc/pki/sa.key"),
		}},
	}, {
		name: "extraArgs: an override, a new path, a value",
		cluster: "controllerManager:\n  extraArgs:\n  - name: controllers\n    value: '*,-ttl'\n  - name: flex-volume-plugin-dir\n    value: /usr/libexec/flex\n  - name: secure-port\n    value: \"10400\"\n" +
			"scheduler:\n  extraArgs:\n  - name: config\n    value: /etc/kubernetes/scheduler-config.yaml\n  - name: bind-address\n    value: 0.0.0.0\n  - name: v\n    value: \"2\"\n",
		want: map[string][]string{
			kcm:   {"--controllers=*,-ttl", "--flex-volume-plugin-dir=" + under("/usr/libexec/flex"), "--secure-port=10400"},
			sched: {"--config=" + under("/etc/kubernetes/scheduler-config.yaml"), "--bind-address=0.0.0.0", "--v=2"},
		},
		absent: map[string][]string{sched: {"bind-address=" + ip}, kcm: {"controllers=*,bootstrapsigner"}},
		// An unspecified bind address is probed at the machine's.
		healthz: map[string]string{kcm: "https://127.77.3.11:10400/healthz", sched: "https://127.77.3.11:10259/healthz"},
	}} {
		t.Run(c.name, func(t *testing.T) {
			cc, err := parseClusterConfiguration([]byte(etcd + c.cluster))
			if err != nil {
				t.Fatal(err)
			}
			args := componentArgs(cc, root, ip)
			for comp, want := range c.want {
				for _, w := range want {
					if !slices.Contains(args[comp], w) {
						t.Errorf("%s lacks %s:\n%s", comp, w, strings.Join(args[comp], "\n"))
					}
				}
			}
			for comp, absent := range c.absent {
				for _, a := range absent {
					if i := slices.IndexFunc(args[comp], func(f string) bool { return strings.HasPrefix(f, "--"+a) }); i >= 0 {
						t.Errorf("%s has %s", comp, args[comp][i])
					}
				}
			}
			for comp, want := range c.healthz {
				port := map[string]int{kcm: kubeControllerManager.port, sched: kubeScheduler.port}[comp]
				if got := healthzURL(args[comp], netip.MustParseAddr(ip), port); got != want {
					t.Errorf("%s's /healthz is probed at %s, want %s", comp, got, want)
				}
			}
		})
	}
}
