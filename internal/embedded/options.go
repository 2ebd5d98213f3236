package embedded

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"

	"bex.co/bex/internal/controlplane"
	"bex.co/bex/internal/domains"
	"bex.co/bex/internal/kubebin"
	"bex.co/bex/internal/sandbox"
)

// Options configures an embedded platform.
type Options struct {
	// StateDir holds everything the platform keeps between runs.
	StateDir string
	// KubeVersion is the pinned Kubernetes version of the management
	// apiserver.
	KubeVersion string
	// DatabaseURL, when set, is used instead of a private Postgres.
	DatabaseURL string
	// PostgresPort is the private Postgres server's port on 127.0.0.1; zero
	// means the one it had last time, else a free one.
	PostgresPort int
	// APIServers is how many management apiservers run. More than one puts
	// a load balancer in front of them, as in front of a management
	// cluster's control plane, and the platform talks to it. Zero means one.
	APIServers int
	// APIServerPort, when set, is every management apiserver's port (each
	// has its own loopback address), as on machines behind a load balancer.
	APIServerPort int
	// NoMVP leaves the Mixed Version Proxy unwired on the apiservers, as
	// kubeadm does.
	NoMVP bool
	// ControlPlaneStarted, when set, is called with the control plane once
	// it serves, before the platform starts on it: a test that rolls the
	// apiservers keeps it.
	ControlPlaneStarted func(*controlplane.ControlPlane)
	// UnsafeNoSandbox runs tenant apps as plain processes of this
	// machine's user, for a single-user machine that cannot run sandboxes;
	// every start warns. Without it the platform refuses to start where
	// sandboxes cannot run.
	UnsafeNoSandbox bool
	// SandboxSubnet is the pool of the sandboxes' addresses (default
	// sandbox.DefaultSubnet).
	SandboxSubnet string
	// SandboxOutbound lets tenant apps open connections beyond this
	// machine.
	SandboxOutbound bool
	// DNSResolver is the host:port of the DNS server Routes' ownership TXT
	// records and addresses are looked up at (a local one where a test
	// domain's records live); empty: the system's resolver.
	DNSResolver string
	// ReservedHostnames are more names no Route may claim, besides the
	// apps' domain (localhost).
	ReservedHostnames []string
}

// NewOptions returns Options with their defaults.
func NewOptions() *Options {
	return &Options{StateDir: ".bex", KubeVersion: kubebin.DefaultKubeVersion}
}

// AddFlags binds the options to fs.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.StateDir, "state-dir", o.StateDir, "directory for the platform's data, kept between runs")
	fs.StringVar(&o.KubeVersion, "kube-version", o.KubeVersion, "pinned Kubernetes version of the management apiserver ("+strings.Join(kubebin.KubeVersions(), ", ")+")")
	fs.StringVar(&o.DatabaseURL, "database-url", o.DatabaseURL, "Postgres URL to use instead of a private server (default $DATABASE_URL)")
	fs.IntVar(&o.PostgresPort, "postgres-port", o.PostgresPort, "port of the private Postgres server (default: the last one, else a free one)")
	fs.IntVar(&o.APIServers, "apiservers", o.APIServers, "how many management apiservers run, behind a load balancer when more than one (default 1)")
	fs.BoolVar(&o.UnsafeNoSandbox, "unsafe-no-sandbox", o.UnsafeNoSandbox, "run tenant apps as plain processes of this user, with access to everything it can read (a single-user machine only)")
	fs.StringVar(&o.SandboxSubnet, "sandbox-subnet", o.SandboxSubnet, "IPv4 pool (/16 to /19) of the tenant sandboxes' addresses (default "+sandbox.DefaultSubnet+")")
	fs.BoolVar(&o.SandboxOutbound, "sandbox-outbound", o.SandboxOutbound, "let tenant apps connect beyond this machine (never to it or to each other)")
	fs.StringVar(&o.DNSResolver, "dns-resolver", o.DNSResolver, "host:port of the DNS server that custom domains' ownership TXT records and addresses are looked up at (default: the system resolver)")
	fs.StringArrayVar(&o.ReservedHostnames, "reserved-hostname", o.ReservedHostnames, "a name no Route may claim (*.NAME: NAME and everything under it); repeatable; the apps' domain is always reserved")
}

// Complete fills in what the flags left out.
func (o *Options) Complete() error {
	if o.DatabaseURL == "" {
		o.DatabaseURL = os.Getenv("DATABASE_URL")
	}
	abs, err := filepath.Abs(o.StateDir)
	if err != nil {
		return fmt.Errorf("resolving --state-dir: %w", err)
	}
	o.StateDir = abs
	o.KubeVersion = strings.TrimPrefix(o.KubeVersion, "v")
	return nil
}

// Validate checks the options.
func (o *Options) Validate() error {
	var errs []error
	if o.StateDir == "" {
		errs = append(errs, errors.New("--state-dir is empty"))
	}
	pinned := kubebin.KubeVersions()
	found := false
	for _, v := range pinned {
		found = found || v == o.KubeVersion
	}
	if !found {
		errs = append(errs, fmt.Errorf("--kube-version %q is not pinned; use one of %s", o.KubeVersion, strings.Join(pinned, ", ")))
	}
	if err := domains.ValidateResolverAddr(o.DNSResolver); err != nil {
		errs = append(errs, fmt.Errorf("--dns-resolver: %w", err))
	}
	if o.APIServers < 0 || o.APIServers > 5 {
		errs = append(errs, fmt.Errorf("--apiservers %d: want 1 to 5", o.APIServers))
	}
	if o.PostgresPort < 0 || o.PostgresPort > 65535 {
		errs = append(errs, fmt.Errorf("--postgres-port %d is not a port", o.PostgresPort))
	}
	return errors.Join(errs...)
}
