package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"strings"

	"github.com/caddyserver/certmagic"
	"github.com/go-logr/logr"
	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"bex.co/bex/cmd/internal/command"
	"bex.co/bex/cmd/internal/workload"
	"bex.co/bex/controllers"
	"bex.co/bex/controllers/fleetupgrade"
	"bex.co/bex/controllers/runtimecreds"
	"bex.co/bex/internal/certstore"
	"bex.co/bex/internal/domains"
	"bex.co/bex/internal/edge"
	"bex.co/bex/internal/hetzner"
	"bex.co/bex/internal/runtime/placed"
	"bex.co/bex/internal/upgrade/verify"
)

// DefaultLeaderElectionID is the name of the Lease the replicas compete for.
const DefaultLeaderElectionID = "bex-controller-manager"

// Options are bex-controller-manager's flags.
type Options struct {
	command.PlatformOptions

	LeaderElect             bool
	LeaderElectionNamespace string
	LeaderElectionID        string
	MetricsBindAddress      string
	HealthProbeBindAddress  string

	// Schedule places Apps through the scheduling.bex.co API.
	Schedule bool
	// FleetUpgrades runs the FleetUpgrade controller; it needs Cluster
	// API's CRDs in the cluster.
	FleetUpgrades bool
	// UpgradeAPIServerPort is the apiservers' port on each control-plane
	// machine; 0 means the Cluster's controlPlaneEndpoint port.
	UpgradeAPIServerPort int32
	// HCloudTokenFile holds a Hetzner Cloud API token of the project the
	// clusters live in; set, it turns the FleetUpgrade's load-balancer
	// hand-off on.
	HCloudTokenFile string
	// VerifyAggregated are GROUP/VERSION/RESOURCE of aggregated APIs the
	// verifier lists on every apiserver of an upgraded cluster.
	VerifyAggregated  []string
	RemoveStaleLeases bool

	EdgeAddresses []string
	// DNSResolver is the host:port of the DNS server Routes' TXT and
	// address records are looked up at; empty: the system's resolver.
	DNSResolver string
	// ReservedHostnames are names the platform serves itself, which no
	// Route may claim (web's --reserved-hostname must be the same).
	ReservedHostnames []string
	// ACMEDirectory is the edge's; certificate state is kept under its key.
	ACMEDirectory string
	Runtime       workload.Options

	aggregated []schema.GroupVersionResource
}

// NewOptions returns the defaults.
func NewOptions() *Options {
	return &Options{
		PlatformOptions: command.NewPlatformOptions(),

		LeaderElect: true, LeaderElectionID: DefaultLeaderElectionID,
		MetricsBindAddress: ":8080", HealthProbeBindAddress: ":8081",
		Schedule: true, FleetUpgrades: true, RemoveStaleLeases: true,
		ACMEDirectory: edge.LetsEncrypt,
		Runtime:       workload.Options{WorkDir: "/var/lib/bex/work"},
	}
}

// AddFlags binds the options to fs.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	o.PlatformOptions.AddFlags(fs, "", "builds, releases, upgrade records, edge certificates")
	fs.BoolVar(&o.LeaderElect, "leader-elect", o.LeaderElect, "Elect a leader among the replicas through a Lease; only the leader reconciles")
	fs.StringVar(&o.LeaderElectionNamespace, "leader-election-namespace", o.LeaderElectionNamespace, "Namespace of the leader election Lease; empty: the pod's namespace (in-cluster)")
	fs.StringVar(&o.LeaderElectionID, "leader-election-id", o.LeaderElectionID, "Name of the leader election Lease")
	fs.StringVar(&o.MetricsBindAddress, "metrics-bind-address", o.MetricsBindAddress, "Address of /metrics; 0 turns it off")
	fs.StringVar(&o.HealthProbeBindAddress, "health-probe-bind-address", o.HealthProbeBindAddress, "Address of /healthz and /readyz; 0 turns it off")
	fs.BoolVar(&o.Schedule, "schedule", o.Schedule, "Place Apps through the scheduling.bex.co API (bex-apiserver)")
	fs.BoolVar(&o.FleetUpgrades, "fleet-upgrades", o.FleetUpgrades, "Run FleetUpgrades (needs Cluster API's CRDs)")
	fs.Int32Var(&o.UpgradeAPIServerPort, "upgrade-apiserver-port", o.UpgradeAPIServerPort, "Port of the apiservers on each control-plane machine, when it differs from the Cluster's endpoint port (CAPH's load balancer listens on 443, the apiservers on 6443) [the endpoint's]")
	fs.StringVar(&o.HCloudTokenFile, "hcloud-token-file", o.HCloudTokenFile, "File with a Hetzner Cloud API token (read and write) of the clusters' project: control-plane servers leave the API load balancer before Cluster API deletes their machines; empty: no hand-off")
	fs.StringArrayVar(&o.VerifyAggregated, "verify-aggregated", o.VerifyAggregated, "GROUP/VERSION/RESOURCE of an aggregated API every apiserver of an upgraded cluster must serve; repeatable")
	fs.BoolVar(&o.RemoveStaleLeases, "remove-stale-leases", o.RemoveStaleLeases, "Let the verifier delete apiserver identity leases of servers that are gone")
	fs.StringArrayVar(&o.EdgeAddresses, "edge-address", o.EdgeAddresses, "Public IP address of the edge that Routes' hostnames must resolve to; repeatable (none: Routes' DNSReady stays Unknown)")
	fs.StringVar(&o.DNSResolver, "dns-resolver", o.DNSResolver, "host:port of the DNS server that Routes' ownership TXT records and addresses are looked up at; empty: the system resolver")
	fs.StringArrayVar(&o.ReservedHostnames, "reserved-hostname", o.ReservedHostnames, "A name the platform serves itself (API, dashboard, git, registry), refused to Routes; *.NAME reserves NAME and everything under it; repeatable (the apps' domain is always reserved)")
	fs.StringVar(&o.ACMEDirectory, "acme-directory", o.ACMEDirectory, "ACME directory of the edge, whose certificates Routes report; empty: CertificateReady stays Unknown")
	o.Runtime.AddFlags(fs)
}

// Complete parses what the flags left as text.
func (o *Options) Complete() error {
	o.aggregated = nil
	for _, a := range o.VerifyAggregated {
		parts := strings.Split(a, "/")
		if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
			return fmt.Errorf("--verify-aggregated %q: want GROUP/VERSION/RESOURCE", a)
		}
		o.aggregated = append(o.aggregated, schema.GroupVersionResource{Group: parts[0], Version: parts[1], Resource: parts[2]})
	}
	return nil
}

// Validate checks the options.
func (o *Options) Validate() error {
	var errs []error
	if err := o.PlatformOptions.Validate("builds, releases and upgrade records"); err != nil {
		errs = append(errs, err)
	}
	if o.LeaderElect && o.LeaderElectionID == "" {
		errs = append(errs, errors.New("--leader-election-id is empty"))
	}
	for _, a := range o.EdgeAddresses {
		if _, err := netip.ParseAddr(a); err != nil {
			errs = append(errs, fmt.Errorf("--edge-address %q is not an IP address", a))
		}
	}
	if err := domains.ValidateResolverAddr(o.DNSResolver); err != nil {
		errs = append(errs, fmt.Errorf("--dns-resolver: %w", err))
	}
	if o.UpgradeAPIServerPort < 0 || o.UpgradeAPIServerPort > 65535 {
		errs = append(errs, fmt.Errorf("--upgrade-apiserver-port %d is not a port", o.UpgradeAPIServerPort))
	}
	errs = append(errs, o.Runtime.Validate()...)
	return errors.Join(errs...)
}

// Run runs the manager until ctx ends.
func (o *Options) Run(ctx context.Context, log logr.Logger) error {
	c, err := command.Open(ctx, o.DatabaseURL, o.Kubeconfig)
	if err != nil {
		return err
	}
	defer c.Store.Close()
	st := c.Store
	mgr, err := ctrl.NewManager(c.Config, ctrl.Options{
		Scheme:                        controllers.NewScheme(),
		LeaderElection:                o.LeaderElect,
		LeaderElectionID:              o.LeaderElectionID,
		LeaderElectionNamespace:       o.LeaderElectionNamespace,
		LeaderElectionReleaseOnCancel: true,
		Metrics:                       metricsserver.Options{BindAddress: o.MetricsBindAddress},
		HealthProbeBindAddress:        o.HealthProbeBindAddress,
	})
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("store", func(r *http.Request) error { return c.StoreReady(r.Context()) }); err != nil {
		return err
	}

	// The Releaser writes App status with the uncached client: it is
	// called from reconciles and must see what it wrote.
	// The manager serves controller-runtime's registry on
	// --metrics-bind-address: the platform's metrics go there too.
	o.Runtime.Metrics = ctrlmetrics.Registry
	rt, err := o.Runtime.NewRuntime(ctx, st, c.Kube, log)
	if err != nil {
		return err
	}
	// The apps' instances and restarts, read by the leader alone.
	leader := func() bool {
		select {
		case <-mgr.Elected():
			return true
		default:
			return false
		}
	}
	instances, err := rt.InstanceMetrics(leader, log.WithName("runtime-metrics"))
	if err != nil {
		return err
	}
	if err := ctrlmetrics.Registry.Register(instances); err != nil {
		return fmt.Errorf("registering the runtime's metrics: %w", err)
	}
	if rt.Placed != nil {
		// Apps a move could not remove from their old cluster: one sweeper
		// per replica; a removal done twice is a no-op.
		go rt.Placed.SweepLeftovers(ctx, placed.SweepInterval)
	}
	deps := controllers.Deps{
		Releases: Releases{Releaser: rt.Releaser, Driver: rt.Driver, Workload: rt.Workload, Kube: c.Kube, ConfigRole: rt.ConfigRole, Subjects: rt.Subjects}, Schedule: o.Schedule,
		DNS: domains.ResolverAt(o.DNSResolver), EdgeAddresses: o.EdgeAddresses, AppDomain: o.Runtime.AppDomain,
		ReservedHostnames: o.ReservedHostnames,
	}
	if rt.Placed != nil && o.FleetUpgrades {
		// Apps run on the fleet's clusters, whose Cluster API kinds the
		// management cluster serves (as FleetUpgrades need): a cluster's
		// deletion holds its workers until its apps moved, and a change
		// of a Cluster looks at its Apps at once.
		deps.ServedApps = st
	}
	if rt.Placed != nil && o.Runtime.RuntimeKubeconfigs != "" {
		// The processes reach the fleet's clusters with the kubeconfigs
		// this controller writes, not with Cluster API's admin ones.
		secret, err := command.ParseSecretName("--runtime-kubeconfigs-secret", o.Runtime.RuntimeKubeconfigs)
		if err != nil {
			return err
		}
		deps.RuntimeCredentials = &runtimecreds.Reconciler{Secret: secret, FleetNamespace: o.Runtime.FleetNamespace, Tenants: o.Runtime.Tenants.KubeOptions()}
		deps.RuntimeSecret = secret
	}
	if o.ACMEDirectory != "" {
		storage, err := certstore.New(st.Pool(), certstore.Options{})
		if err != nil {
			return err
		}
		issuer := &certmagic.ACMEIssuer{CA: o.ACMEDirectory}
		deps.Certificates = &edge.Certificates{Storage: storage, IssuerKeys: []string{issuer.IssuerKey()}}
	}
	if o.FleetUpgrades {
		deps.FleetUpgrades = &fleetupgrade.Reconciler{
			Verifier:           fleetupgrade.RunVerifier{Options: verify.Options{Always: verify.Baseline(), Aggregated: o.aggregated, RemoveStaleLeases: o.RemoveStaleLeases}},
			ManagementVerifier: fleetupgrade.ManagementRunVerifier{Options: verify.Options{Always: verify.Baseline(), Aggregated: o.aggregated, RemoveStaleLeases: o.RemoveStaleLeases}},
			Records:            st,
			Options:            fleetupgrade.Options{APIServerPort: o.UpgradeAPIServerPort},
			Metrics:            ctrlmetrics.Registry,
		}
		if o.HCloudTokenFile != "" {
			token, err := os.ReadFile(o.HCloudTokenFile)
			if err != nil || strings.TrimSpace(string(token)) == "" {
				return fmt.Errorf("--hcloud-token-file: no token in %s: %v", o.HCloudTokenFile, err)
			}
			hc := hcloud.NewClient(hcloud.WithToken(strings.TrimSpace(string(token))), hcloud.WithApplication("bex-controller-manager", ""))
			deps.FleetUpgrades.LoadBalancers = fleetupgrade.HetznerLoadBalancers(hc, hetzner.HandoffOptions{})
		}
	}
	if err := controllers.Setup(mgr, deps); err != nil {
		return fmt.Errorf("setting up controllers: %w", err)
	}
	log.Info("Starting", "controllers", controllers.Names(), "fleetUpgrades", o.FleetUpgrades, "leaderElection", o.LeaderElect)
	return mgr.Start(ctx)
}

// Main is bex-controller-manager's command line: it parses args (without
// the program name), completes, validates and runs the options until ctx
// ends. Logs and help go to out. A refused command line is a
// command.UsageError.
func Main(ctx context.Context, args []string, out io.Writer) error {
	o := NewOptions()
	fs := command.NewFlagSet("bex-controller-manager", out)
	o.AddFlags(fs)
	if done, err := command.Parse(fs, args, o.Complete, o.Validate); done {
		return err
	}
	return o.Run(ctx, command.NewLogger(out))
}
