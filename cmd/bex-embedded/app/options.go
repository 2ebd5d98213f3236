package app

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/resource"

	"bex.co/bex/builder/build"
	"bex.co/bex/builder/gitserver"
	"bex.co/bex/builder/release"
	"bex.co/bex/internal/controlplane"
	"bex.co/bex/internal/domains"
	"bex.co/bex/internal/edge"
	"bex.co/bex/internal/kubebin"
	"bex.co/bex/internal/localfleet"
	"bex.co/bex/internal/loopfs"
	"bex.co/bex/internal/quota"
	"bex.co/bex/internal/sandbox"
	"bex.co/bex/internal/store"
	"bex.co/bex/web/api"
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
	// LocalFleetStarted, when set, is called with the local fleet's Host
	// once it is made, before Cluster API's managers start: a test that
	// watches machines join and leave their load balancers keeps it.
	LocalFleetStarted func(*localfleet.Host)
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
	// BuildCPU is the CPU quota of each sandboxed build step, a quantity
	// of cores ("1", "500m").
	BuildCPU string
	// BuildDisk bounds the disk of each build's work directory (checkout,
	// HOME, TMPDIR, outputs); BuildCacheDisk that of each tenant's build
	// caches. Quantities of bytes ("4Gi").
	BuildDisk, BuildCacheDisk string

	// buildCPUMilli, buildDisk and buildCacheDisk are the three above,
	// parsed by Complete.
	buildCPUMilli, buildDisk, buildCacheDisk int64

	// CertificateBudget is how many new hostnames one tenant's Routes get
	// certificates for per hour (edge.CertificateBudget); 0 sets no limit.
	CertificateBudget int
	// MaxLogStreamsPerTenant caps the logs one tenant follows at once
	// through the API; zero means api.DefaultMaxLogStreamsPerTenant.
	MaxLogStreamsPerTenant int

	// MaxPushBytes bounds one pushed pack (gitserver.Options.MaxPushBytes).
	MaxPushBytes int64
	// MaxCheckoutBytes bounds what one build checks out of the pushed
	// commit (build.Options.MaxCheckoutBytes).
	MaxCheckoutBytes int64
	// BuildLogLines is how many lines of a build's log are kept
	// (store.Limits.BuildLogLines).
	BuildLogLines int
	// ReleaseRetention is how many releases of an app keep their
	// directory and image (release.Options.ReleaseRetention); older ones
	// are pruned and cannot be rolled back to.
	ReleaseRetention int
	// Quotas are the tenants' default quotas.
	Quotas *quota.Defaults
	// DNSResolver is the host:port of the DNS server Routes' ownership TXT
	// records and addresses are looked up at (a local one where a test
	// domain's records live); empty: the system's resolver.
	DNSResolver string
	// ReservedHostnames are more names no Route may claim, besides the
	// apps' domain (localhost).
	ReservedHostnames []string
	// NoLocalFleet runs the platform without its local Cluster API fleet:
	// no Cluster API managers, no local provider, and bex fleet create
	// answers that there is none.
	NoLocalFleet bool
	// ManagedPlane has Cluster API manage the platform's own control
	// plane: it starts with one kube-apiserver behind a load balancer,
	// and once the local fleet's managers run, the cluster "management"
	// (a LocalCluster that takes the plane over, three machines made by
	// the real KubeadmControlPlane) serves it and that first
	// kube-apiserver stops; bex upgrade then rolls the platform's own
	// plane (docs/fleet.md, "The management plane").
	ManagedPlane bool
	// NodeBinary is bex-node, which the local fleet's worker machines run
	// (its directory, make build's bin/, is the platform's binary
	// directory they see); empty means the one beside this executable,
	// and without one the fleet runs control-plane machines only.
	NodeBinary string
}

// NewOptions returns Options with their defaults.
func NewOptions() *Options {
	return &Options{StateDir: ".bex", KubeVersion: kubebin.DefaultKubeVersion, BuildCPU: "1", BuildDisk: "4Gi", BuildCacheDisk: "4Gi",
		CertificateBudget: edge.DefaultCertificateBudget, MaxLogStreamsPerTenant: api.DefaultMaxLogStreamsPerTenant,
		MaxPushBytes: gitserver.DefaultMaxPushBytes, MaxCheckoutBytes: build.DefaultMaxCheckoutBytes,
		BuildLogLines: store.DefaultBuildLogLines, ReleaseRetention: release.DefaultReleaseRetention, Quotas: quota.NewDefaults()}
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
	fs.StringVar(&o.BuildCPU, "build-cpu", o.BuildCPU, "CPU quota of each sandboxed build step, in cores (\"1\", \"500m\")")
	fs.StringVar(&o.BuildDisk, "build-disk", o.BuildDisk, "disk of each build's work directory: checkout, HOME, TMPDIR and outputs (\"4Gi\", \"512Mi\")")
	fs.StringVar(&o.BuildCacheDisk, "build-cache-disk", o.BuildCacheDisk, "disk of each tenant's build caches (\"4Gi\")")
	fs.IntVar(&o.CertificateBudget, "certificate-budget", o.CertificateBudget, "new hostnames per tenant per hour that the tenant's Routes get certificates for (a wildcard Route takes one per name); 0: no limit")
	fs.IntVar(&o.MaxLogStreamsPerTenant, "max-log-streams-per-tenant", o.MaxLogStreamsPerTenant, "how many logs (of builds and apps) one tenant may follow at once; the next is answered 429")
	fs.Int64Var(&o.MaxPushBytes, "max-push-bytes", o.MaxPushBytes, "largest pack one push may send; a larger one is refused before it is stored")
	fs.Int64Var(&o.MaxCheckoutBytes, "max-checkout-bytes", o.MaxCheckoutBytes, "largest size the pushed tree may check out to in a build; a larger one fails the build saying so")
	fs.IntVar(&o.BuildLogLines, "build-log-lines", o.BuildLogLines, "lines of a build's log kept: past it the oldest are dropped, and the log says so")
	fs.IntVar(&o.ReleaseRetention, "release-retention", o.ReleaseRetention, "releases of an app that keep their files and image: older ones are pruned after each release and cannot be rolled back to (1 or more)")
	o.Quotas.AddFlags(fs)
	fs.StringVar(&o.DNSResolver, "dns-resolver", o.DNSResolver, "host:port of the DNS server that custom domains' ownership TXT records and addresses are looked up at (default: the system resolver)")
	fs.BoolVar(&o.NoLocalFleet, "no-local-fleet", o.NoLocalFleet, "run no local Cluster API fleet (Cluster API's managers, built on the first start, and clusters whose machines are processes here)")
	fs.BoolVar(&o.ManagedPlane, "managed-control-plane", o.ManagedPlane, "have Cluster API manage the platform's own control plane: three machines of the local fleet take it over once its managers run, and bex upgrade rolls it")
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
	var errs []error
	if q, err := resource.ParseQuantity(o.BuildCPU); err != nil {
		errs = append(errs, fmt.Errorf("--build-cpu %q: want cores, such as 1 or 500m", o.BuildCPU))
	} else {
		o.buildCPUMilli = q.MilliValue()
	}
	for _, f := range []struct {
		name, v string
		n       *int64
	}{{"--build-disk", o.BuildDisk, &o.buildDisk}, {"--build-cache-disk", o.BuildCacheDisk, &o.buildCacheDisk}} {
		if q, err := resource.ParseQuantity(f.v); err != nil {
			errs = append(errs, fmt.Errorf("%s %q: want bytes, such as 4Gi or 512Mi", f.name, f.v))
		} else {
			*f.n = q.Value()
		}
	}
	return errors.Join(errs...)
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
	if o.ManagedPlane && o.NoLocalFleet {
		errs = append(errs, errors.New("--managed-control-plane needs the local fleet, whose machines serve the plane: drop --no-local-fleet"))
	}
	if o.ManagedPlane && o.APIServers > 1 {
		errs = append(errs, fmt.Errorf("--managed-control-plane starts the plane with one kube-apiserver and Cluster API gives it three: drop --apiservers %d", o.APIServers))
	}
	// The kernel takes no quota under 1 ms per 100 ms period.
	if o.buildCPUMilli < 10 {
		errs = append(errs, fmt.Errorf("--build-cpu %s: want at least 10m", o.BuildCPU))
	}
	for _, f := range []struct {
		name, v string
		n       int64
	}{{"--build-disk", o.BuildDisk, o.buildDisk}, {"--build-cache-disk", o.BuildCacheDisk, o.buildCacheDisk}} {
		if f.n < loopfs.MinSize {
			errs = append(errs, fmt.Errorf("%s %s: want at least %dMi", f.name, f.v, loopfs.MinSize>>20))
		}
	}
	if o.CertificateBudget < 0 {
		errs = append(errs, fmt.Errorf("--certificate-budget %d is negative: give the new hostnames a tenant may get certificates for per hour, or 0 for no limit", o.CertificateBudget))
	}
	if o.MaxLogStreamsPerTenant < 1 {
		errs = append(errs, fmt.Errorf("--max-log-streams-per-tenant %d: want 1 or more", o.MaxLogStreamsPerTenant))
	}
	if o.MaxPushBytes < 0 {
		errs = append(errs, fmt.Errorf("--max-push-bytes %d: must not be negative", o.MaxPushBytes))
	}
	if o.MaxCheckoutBytes < 0 {
		errs = append(errs, fmt.Errorf("--max-checkout-bytes %d: must not be negative", o.MaxCheckoutBytes))
	}
	if o.BuildLogLines < 0 {
		errs = append(errs, fmt.Errorf("--build-log-lines %d: must not be negative", o.BuildLogLines))
	}
	if o.ReleaseRetention < 1 {
		errs = append(errs, fmt.Errorf("--release-retention %d: want 1 or more, the releases of an app kept for rollbacks (the one serving is always kept)", o.ReleaseRetention))
	}
	if o.PostgresPort < 0 || o.PostgresPort > 65535 {
		errs = append(errs, fmt.Errorf("--postgres-port %d is not a port", o.PostgresPort))
	}
	if o.Quotas != nil {
		errs = append(errs, o.Quotas.Validate())
	}
	return errors.Join(errs...)
}

// quotas returns the default quotas: the built-in ones when Options were
// made without NewOptions.
func (o *Options) quotas() *quota.Defaults {
	if o.Quotas == nil {
		return quota.NewDefaults()
	}
	return o.Quotas
}
