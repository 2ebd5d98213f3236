package app

import (
	"strings"
	"testing"
	"time"
)

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(*Options)
		want []string // in the error; none: valid
	}{
		{"complete", func(*Options) {}, nil},
		{"nothing set", func(o *Options) { *o = Options{MaxPods: 110} },
			[]string{"--kubeconfig is required", "--node-name is required", "--address is required", "--tls-cert-file is required", "--client-ca-file is required", "--kubelet-version is required"}},
		{"bad address", func(o *Options) { o.Address = "worker-1" }, []string{`--address "worker-1" is not an IP address`}},
		{"version without v", func(o *Options) { o.KubeletVersion = "1.37.2" }, []string{"must start with v"}},
		{"too many pods", func(o *Options) { o.MaxPods = 300 }, []string{"--max-pods 300"}},
		{"bad memory", func(o *Options) { o.Memory = "lots" }, []string{`--memory "lots"`}},
		{"labels and taints", func(o *Options) {
			o.Labels = map[string]string{"bex.co/pool": "general", "node.kubernetes.io/exclude-from-external-load-balancers": "", "topology.kubernetes.io/zone": "a"}
			o.Taints = "bex.co/dedicated=apps:NoSchedule,bex.co/spare:PreferNoSchedule"
		}, nil},
		{"a role label", func(o *Options) { o.Labels = map[string]string{"node-role.kubernetes.io/worker": "", "k8s.io/x": "y"} },
			[]string{"--node-labels: labels k8s.io/x, node-role.kubernetes.io/worker are in the kubernetes.io or k8s.io namespace, which a node may not set on itself"}},
		{"a bad label", func(o *Options) { o.Labels = map[string]string{"bex.co/pool": "a b"} }, []string{`label bex.co/pool="a b"`}},
		{"a taint without effect", func(o *Options) { o.Taints = "bex.co/dedicated=apps" }, []string{`--register-with-taints: taint "bex.co/dedicated=apps": want KEY=VALUE:EFFECT or KEY:EFFECT`}},
		{"platform bin dir", func(o *Options) { o.PlatformBinDir = "/opt/bex/bin" }, nil},
		{"relative platform bin dir", func(o *Options) { o.PlatformBinDir = "bin" }, []string{`--platform-bin-dir "bin" must be an absolute path`}},
		{"an image gc age", func(o *Options) { o.ImageMinimumGCAge = 30 * time.Second }, nil},
		{"a negative image gc age", func(o *Options) { o.ImageMinimumGCAge = -time.Minute }, []string{"--image-minimum-gc-age -1m0s must be positive"}},
		{"a taint's effect", func(o *Options) { o.Taints = "a=b:Never" }, []string{`effect "Never" is not NoSchedule`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := NewOptions()
			o.Kubeconfig, o.Address, o.TLSCertFile, o.TLSKeyFile, o.ClientCAFile, o.KubeletVersion =
				"node.kubeconfig", "10.0.0.2", "tls.crt", "tls.key", "ca.crt", "v1.37.2"
			tc.set(o)
			err := o.Validate()
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("Validate passed")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

func TestResetValidate(t *testing.T) {
	if err := (&ResetOptions{StateDir: "/var/lib/bex-node"}).Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	if err := (&ResetOptions{}).Validate(); err == nil || !strings.Contains(err.Error(), "--state-dir is required") {
		t.Fatalf("Validate without a state directory: %v", err)
	}
}
