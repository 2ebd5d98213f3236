package app

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/kubernetes"

	"bex.co/bex/cmd/internal/command"
	"bex.co/bex/internal/kubeconfig"
	"bex.co/bex/internal/sandbox"
	"bex.co/bex/node"
)

// Options are bex-node's flags.
type Options struct {
	Kubeconfig        string
	NodeName, Address string
	Port              int
	TLSCertFile       string
	TLSKeyFile        string
	ClientCAFile      string
	StateDir          string
	SandboxSubnet     string
	RegistryConfig    string
	KubeletVersion    string
	ProviderID        string
	Labels            map[string]string
	Taints            string
	CPU, Memory       string
	MaxPods           int
	SandboxOutbound   bool
	PlatformBinDir    string
	ImageMinimumGCAge time.Duration
}

// NewOptions returns the defaults.
func NewOptions() *Options {
	host, _ := os.Hostname()
	return &Options{NodeName: host, Port: node.DefaultPort, StateDir: "/var/lib/bex-node", MaxPods: 110,
		ImageMinimumGCAge: 2 * time.Minute}
}

// AddFlags binds the options to fs.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "Kubeconfig with the node's credentials (system:node:NAME in system:nodes)")
	fs.StringVar(&o.NodeName, "node-name", o.NodeName, "Name of the Node [the hostname]")
	fs.StringVar(&o.Address, "address", o.Address, "The Node's InternalIP; the agent's API listens on it")
	fs.IntVar(&o.Port, "port", o.Port, "Port of the agent's API (container logs for the apiserver)")
	fs.StringVar(&o.TLSCertFile, "tls-cert-file", o.TLSCertFile, "Serving certificate of the agent's API, for --address")
	fs.StringVar(&o.TLSKeyFile, "tls-private-key-file", o.TLSKeyFile, "Key of --tls-cert-file")
	fs.StringVar(&o.ClientCAFile, "client-ca-file", o.ClientCAFile, "CAs of the API's clients (the apiserver's kubelet client certificate)")
	fs.StringVar(&o.StateDir, "state-dir", o.StateDir, "Where unpacked images and containers' logs are kept")
	fs.StringVar(&o.SandboxSubnet, "sandbox-subnet", o.SandboxSubnet, "Pool of the containers' addresses (a /16 to /19 no route overlaps) [10.231.0.0/16]")
	fs.BoolVar(&o.SandboxOutbound, "sandbox-outbound", o.SandboxOutbound, "Let containers open connections beyond the machine")
	fs.StringVar(&o.PlatformBinDir, "platform-bin-dir", o.PlatformBinDir, "The platform's binary directory (bex-static): containers on the run base (stack images) see it read-only and have it at the end of their PATH, as on the process runtime [none]")
	fs.StringVar(&o.RegistryConfig, "registry-config", o.RegistryConfig, "Docker config.json with the node's registry credentials, tried after a Pod's image pull secrets [none]")
	fs.StringVar(&o.KubeletVersion, "kubelet-version", o.KubeletVersion, "Version reported in the Node's nodeInfo (the control plane's, as vX.Y.Z)")
	fs.StringVar(&o.ProviderID, "provider-id", o.ProviderID, "spec.providerID of the Node (its Cluster API Machine's)")
	fs.StringToStringVar(&o.Labels, "node-labels", o.Labels, "Labels of the Node when it registers, as the kubelet's (no kubernetes.io or k8s.io label but those a kubelet may set on itself)")
	fs.StringVar(&o.Taints, "register-with-taints", o.Taints, "Taints of the Node when it registers, as the kubelet's: comma-separated KEY=VALUE:EFFECT [none]")
	fs.StringVar(&o.CPU, "cpu", o.CPU, "CPU the Node offers [this machine's CPUs]")
	fs.StringVar(&o.Memory, "memory", o.Memory, "Memory the Node offers [this machine's]")
	fs.IntVar(&o.MaxPods, "max-pods", o.MaxPods, "Pods the Node runs at most")
	fs.DurationVar(&o.ImageMinimumGCAge, "image-minimum-gc-age", o.ImageMinimumGCAge, "How long an unpacked image no container uses stays on the node before it is deleted, as the kubelet's")
}

// Validate says what is wrong with the flags, all at once.
func (o *Options) Validate() error {
	var errs []error
	for _, f := range []struct{ v, flag string }{
		{o.Kubeconfig, "--kubeconfig"}, {o.NodeName, "--node-name"}, {o.Address, "--address"},
		{o.TLSCertFile, "--tls-cert-file"}, {o.TLSKeyFile, "--tls-private-key-file"}, {o.ClientCAFile, "--client-ca-file"},
		{o.KubeletVersion, "--kubelet-version"},
	} {
		if f.v == "" {
			errs = append(errs, fmt.Errorf("%s is required", f.flag))
		}
	}
	if o.Address != "" {
		if _, err := netip.ParseAddr(o.Address); err != nil {
			errs = append(errs, fmt.Errorf("--address %q is not an IP address", o.Address))
		}
	}
	if o.PlatformBinDir != "" && !filepath.IsAbs(o.PlatformBinDir) {
		errs = append(errs, fmt.Errorf("--platform-bin-dir %q must be an absolute path", o.PlatformBinDir))
	}
	if o.KubeletVersion != "" && !strings.HasPrefix(o.KubeletVersion, "v") {
		errs = append(errs, fmt.Errorf("--kubelet-version %q must start with v, as v1.37.2", o.KubeletVersion))
	}
	if err := node.ValidateNodeLabels(o.Labels); err != nil {
		errs = append(errs, fmt.Errorf("--node-labels: %w", err))
	}
	if _, err := node.ParseTaints(o.Taints); err != nil {
		errs = append(errs, fmt.Errorf("--register-with-taints: %w", err))
	}
	if o.MaxPods < 1 || o.MaxPods > 250 {
		errs = append(errs, fmt.Errorf("--max-pods %d must be 1 to 250 (one sandbox bridge's addresses)", o.MaxPods))
	}
	if o.ImageMinimumGCAge <= 0 {
		errs = append(errs, fmt.Errorf("--image-minimum-gc-age %s must be positive, as 2m", o.ImageMinimumGCAge))
	}
	for _, q := range []struct{ v, flag string }{{o.CPU, "--cpu"}, {o.Memory, "--memory"}} {
		if q.v == "" {
			continue
		}
		if v, err := resource.ParseQuantity(q.v); err != nil || v.Sign() <= 0 {
			errs = append(errs, fmt.Errorf("%s %q must be a positive quantity, as 2 or 4Gi", q.flag, q.v))
		}
	}
	return errors.Join(errs...)
}

// Run runs the agent until ctx ends.
func (o *Options) Run(ctx context.Context, log logr.Logger) error {
	cfg, err := kubeconfig.Load(o.Kubeconfig, "workload cluster")
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	cert, err := tls.LoadX509KeyPair(o.TLSCertFile, o.TLSKeyFile)
	if err != nil {
		return fmt.Errorf("loading the API's serving certificate: %w", err)
	}
	caPEM, err := os.ReadFile(o.ClientCAFile)
	if err != nil {
		return fmt.Errorf("reading --client-ca-file: %w", err)
	}
	cas := x509.NewCertPool()
	if !cas.AppendCertsFromPEM(caPEM) {
		return fmt.Errorf("--client-ca-file %s holds no PEM certificate", o.ClientCAFile)
	}
	taints, err := node.ParseTaints(o.Taints)
	if err != nil {
		return fmt.Errorf("--register-with-taints: %w", err)
	}
	var kc authn.Keychain
	if o.RegistryConfig != "" {
		if kc, err = node.RegistryConfigKeychain(o.RegistryConfig); err != nil {
			return err
		}
	}
	var readOnly []string
	if o.PlatformBinDir != "" {
		if st, err := os.Stat(o.PlatformBinDir); err != nil || !st.IsDir() {
			return fmt.Errorf("--platform-bin-dir %s is not a directory", o.PlatformBinDir)
		}
		readOnly = []string{o.PlatformBinDir}
	}
	stateDir, err := filepath.Abs(o.StateDir)
	if err != nil {
		return err
	}
	// The slot is the state directory's: the containers outlive the
	// agent, for the next one to adopt ("bex-node reset" removes them).
	sb, err := sandbox.New(sandbox.Options{Subnet: o.SandboxSubnet, StateDir: stateDir, Owner: stateDir,
		ReadOnlyPaths: readOnly, Outbound: o.SandboxOutbound})
	if err != nil {
		return fmt.Errorf("bex-node runs containers in sandboxes: %w", err)
	}
	defer sb.Release()
	capacity := corev1.ResourceList{corev1.ResourcePods: *resource.NewQuantity(int64(o.MaxPods), resource.DecimalSI)}
	for _, q := range []struct {
		v    string
		name corev1.ResourceName
	}{{o.CPU, corev1.ResourceCPU}, {o.Memory, corev1.ResourceMemory}} {
		if q.v != "" {
			capacity[q.name] = resource.MustParse(q.v)
		}
	}
	a, err := node.New(node.Options{
		Client: client, NodeName: o.NodeName, Address: netip.MustParseAddr(o.Address), Port: o.Port,
		ServingCert: cert, ClientCAs: cas, Sandbox: sb, StateDir: stateDir, PlatformBinDir: o.PlatformBinDir, Keychain: kc,
		Capacity: capacity, KubeletVersion: o.KubeletVersion, ProviderID: o.ProviderID, Labels: o.Labels, Taints: taints,
		ImageMinimumGCAge: o.ImageMinimumGCAge, Log: log,
	})
	if err != nil {
		return err
	}
	return a.Run(ctx)
}

// Main parses args and runs bex-node until ctx ends, or runs its reset
// subcommand.
func Main(ctx context.Context, args []string, out io.Writer) error {
	if len(args) > 0 && args[0] == "reset" {
		return mainReset(args[1:], out)
	}
	o := NewOptions()
	fs := command.NewFlagSet("bex-node", out)
	o.AddFlags(fs)
	if done, err := command.Parse(fs, args, o.Validate); done {
		return err
	}
	return o.Run(ctx, command.NewLogger(out))
}
