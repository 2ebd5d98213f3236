package app

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
	"bex.co/bex/cmd/internal/command"
	"bex.co/bex/internal/appmetrics"
	"bex.co/bex/internal/certstore"
	"bex.co/bex/internal/edge"
	"bex.co/bex/internal/httpserve"
	"bex.co/bex/internal/kubeconfig"
	"bex.co/bex/internal/rfc2136"
	"bex.co/bex/internal/runtime/placed"
	"bex.co/bex/internal/store"
)

// Options are bex-edge's flags.
type Options struct {
	Kubeconfig       string
	RoutesKubeconfig string
	DatabaseURL      string
	// FollowPlacement routes each app to the cluster that serves it (the
	// platform's record in Postgres): a Cluster API cluster of the
	// management cluster, or WorkloadCluster, --kubeconfig's.
	FollowPlacement bool
	WorkloadCluster string
	FleetNamespace  string
	// RuntimeKubeconfigs is workload.Options.RuntimeKubeconfigs: the
	// Secret the Cluster API clusters' kubeconfigs are read from.
	RuntimeKubeconfigs string

	HTTPListen, HTTPSListen, MetricsListen string
	PublicHTTPPort, PublicHTTPSPort        int
	AppDomain                              string

	ACMEDirectory, ACMEEmail, ACMECAFile string
	LocalCADir                           string
	// DNS01 is the DNS server wildcard certificates' challenges are
	// published with.
	DNS01 rfc2136.Options

	AccessLog bool
	// AppMetricsTokenFile, when set, holds the bearer token that opens
	// the apps' request totals (appmetrics.TotalsPath on MetricsListen),
	// which bex-web reads for its per-app series.
	AppMetricsTokenFile string

	CertificateBudget int
}

// NewOptions returns the defaults.
func NewOptions() *Options {
	return &Options{
		HTTPListen: ":80", HTTPSListen: ":443", MetricsListen: ":9090",
		ACMEDirectory: edge.LetsEncrypt, DatabaseURL: os.Getenv("DATABASE_URL"),
		CertificateBudget: edge.DefaultCertificateBudget,
	}
}

// AddFlags binds the options to fs.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "Kubeconfig of the cluster the edge runs in (EndpointSlices of the apps' Services); empty: in-cluster")
	fs.StringVar(&o.RoutesKubeconfig, "routes-kubeconfig", o.RoutesKubeconfig, "Kubeconfig of the management cluster that holds the Routes; empty: --kubeconfig")
	fs.BoolVar(&o.FollowPlacement, "follow-placement", o.FollowPlacement, "Route each app to the cluster that serves it, as the platform recorded it: a Cluster API cluster of the management cluster (its <cluster>-kubeconfig Secret; the apps' Pod IPs must be reachable from here) or --workload-cluster (docs/install.md); the same as the controller manager's, web's and the git receiver's")
	fs.StringVar(&o.FleetNamespace, "fleet-namespace", o.FleetNamespace, "With --follow-placement: read the Cluster API clusters apps run on, and their kubeconfig Secrets, in this namespace only (default: all)")
	fs.StringVar(&o.WorkloadCluster, "workload-cluster", o.WorkloadCluster, "With --follow-placement: the name the scheduler knows --kubeconfig's cluster by (bex-apiserver's --local-cluster NAME:…); empty: apps run on Cluster API clusters only")
	fs.StringVar(&o.RuntimeKubeconfigs, "runtime-kubeconfigs-secret", o.RuntimeKubeconfigs, "With --follow-placement: NAMESPACE/NAME of the Secret the Cluster API clusters' kubeconfigs are read from (key NAMESPACE.CLUSTER, written by the controller manager) instead of their admin <cluster>-kubeconfig Secrets; the same as the controller manager's")
	fs.StringVar(&o.DatabaseURL, "database-url", o.DatabaseURL, "Postgres URL where certificates, ACME accounts and locks are shared [$DATABASE_URL]")
	fs.StringVar(&o.HTTPListen, "http-listen", o.HTTPListen, "Address of the HTTP port (ACME challenges, redirects to HTTPS)")
	fs.StringVar(&o.HTTPSListen, "https-listen", o.HTTPSListen, "Address of the HTTPS port")
	fs.StringVar(&o.MetricsListen, "metrics-listen", o.MetricsListen, "Address of /metrics and /healthz; empty turns it off")
	fs.IntVar(&o.PublicHTTPPort, "public-http-port", 0, "Port clients reach the HTTP listener on, when a load balancer maps it [the listen port]")
	fs.IntVar(&o.PublicHTTPSPort, "public-https-port", 0, "Port clients reach the HTTPS listener on; redirects name it [the listen port]")
	fs.StringVar(&o.AppDomain, "app-domain", o.AppDomain, "Domain of the apps' default hostnames, <app>-<tenant>.<domain>; empty serves Routes only")
	fs.StringVar(&o.ACMEDirectory, "acme-directory", o.ACMEDirectory, "ACME directory URL")
	fs.StringVar(&o.ACMEEmail, "acme-email", o.ACMEEmail, "Contact address of the ACME account")
	fs.StringVar(&o.ACMECAFile, "acme-ca-file", o.ACMECAFile, "PEM file of CAs to trust for the ACME directory's own HTTPS (pebble)")
	o.DNS01.AddFlags(fs)
	fs.StringVar(&o.LocalCADir, "local-ca-dir", o.LocalCADir, "Sign certificates with the local CA in this directory instead of ACME (created if missing)")
	fs.BoolVar(&o.AccessLog, "access-log", o.AccessLog, "Log every request")
	fs.StringVar(&o.AppMetricsTokenFile, "app-metrics-token-file", o.AppMetricsTokenFile, "File with the bearer token that opens "+appmetrics.TotalsPath+" on --metrics-listen: every app's request counts and latency buckets, which bex-web reads for the per-app series (the same token as bex-web's --edge-metrics-token-file); empty: not served")
	fs.IntVar(&o.CertificateBudget, "certificate-budget", o.CertificateBudget, "New hostnames per tenant per hour that the tenant's Routes get certificates for on demand (a wildcard Route takes one per name); 0: no limit")
}

// Complete fills the public ports from the listen addresses and reads the
// TSIG secret.
func (o *Options) Complete() error {
	if err := o.DNS01.Complete(); err != nil {
		return err
	}
	for _, p := range []struct {
		public *int
		listen string
	}{{&o.PublicHTTPPort, o.HTTPListen}, {&o.PublicHTTPSPort, o.HTTPSListen}} {
		if *p.public != 0 {
			continue
		}
		_, port, err := net.SplitHostPort(p.listen)
		if err != nil {
			return fmt.Errorf("listen address %q: %w", p.listen, err)
		}
		if *p.public, err = strconv.Atoi(port); err != nil {
			return fmt.Errorf("listen address %q: port is not a number", p.listen)
		}
	}
	return nil
}

// Validate checks the options.
func (o *Options) Validate() error {
	var errs []error
	if o.DatabaseURL == "" {
		errs = append(errs, errors.New("--database-url (or DATABASE_URL) is required: certificates are kept in Postgres"))
	}
	if o.LocalCADir == "" && o.ACMEDirectory == "" {
		errs = append(errs, errors.New("set --acme-directory or --local-ca-dir"))
	}
	if err := o.DNS01.Validate(); err != nil {
		errs = append(errs, err)
	}
	if o.DNS01.Configured() && o.LocalCADir != "" {
		errs = append(errs, errors.New("--acme-dns-rfc2136-* configure ACME DNS-01 challenges, which --local-ca-dir does not use: drop one or the other"))
	}
	if !o.FollowPlacement && (o.WorkloadCluster != "" || o.FleetNamespace != "" || o.RuntimeKubeconfigs != "") {
		errs = append(errs, errors.New("--workload-cluster, --fleet-namespace and --runtime-kubeconfigs-secret need --follow-placement: without it every app is routed to --kubeconfig's cluster"))
	}
	if _, err := command.ParseSecretName("--runtime-kubeconfigs-secret", o.RuntimeKubeconfigs); err != nil {
		errs = append(errs, err)
	}
	if o.CertificateBudget < 0 {
		errs = append(errs, fmt.Errorf("--certificate-budget %d is negative: give the new hostnames a tenant may get certificates for per hour, or 0 for no limit", o.CertificateBudget))
	}
	if o.AppMetricsTokenFile != "" && o.MetricsListen == "" {
		errs = append(errs, errors.New("--app-metrics-token-file serves the apps' request totals on --metrics-listen, which is empty: give both or neither"))
	}
	if o.PublicHTTPPort == 0 || o.PublicHTTPSPort == 0 {
		errs = append(errs, errors.New("listening on port 0 needs --public-http-port and --public-https-port"))
	}
	return errors.Join(errs...)
}

// Run serves until ctx is done.
func (o *Options) Run(ctx context.Context, log logr.Logger) error {
	var totals http.Handler
	var observe func(edge.Observation)
	if o.AppMetricsTokenFile != "" {
		token, err := appmetrics.ReadToken(o.AppMetricsTokenFile)
		if err != nil {
			return fmt.Errorf("--app-metrics-token-file: %w", err)
		}
		t := appmetrics.NewTotals(0, 0)
		totals = command.BearerOnly(token, t)
		observe = func(ob edge.Observation) {
			if ob.Matched && ob.Route.App != "" {
				t.Observe(ob.Route.Tenant, ob.Route.App, ob.Status, ob.Duration)
			}
		}
	}
	st, err := store.Open(ctx, o.DatabaseURL)
	if err != nil {
		return err
	}
	defer st.Close()
	storage, err := certstore.New(st.Pool(), certstore.Options{})
	if err != nil {
		return err
	}

	local, err := kubeconfig.Load(o.Kubeconfig, "cluster")
	if err != nil {
		return err
	}
	routesCfg := local
	if o.RoutesKubeconfig != "" {
		if routesCfg, err = kubeconfig.Load(o.RoutesKubeconfig, "cluster of the Routes"); err != nil {
			return err
		}
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := platformv1alpha1.AddToScheme(scheme); err != nil {
		return err
	}
	// The workload cluster's cache holds the tenants' namespaces and their
	// apps' Services and EndpointSlices only; with one cluster, the Routes
	// are in the same cache.
	sliceCache, err := cache.New(local, edge.SliceCacheOptions(scheme))
	if err != nil {
		return fmt.Errorf("creating the EndpointSlice cache: %w", err)
	}
	routeCache := sliceCache
	if o.RoutesKubeconfig != "" {
		if routeCache, err = cache.New(routesCfg, cache.Options{Scheme: scheme}); err != nil {
			return fmt.Errorf("creating the Route cache: %w", err)
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for _, c := range uniqueCaches(routeCache, sliceCache) {
		go func() {
			if err := c.Start(ctx); err != nil {
				log.Error(err, "Cache stopped")
			}
		}()
	}
	slices, err := edge.WatchEndpointSlices(ctx, sliceCache)
	if err != nil {
		return err
	}
	var apps edge.Apps = slices
	if o.FollowPlacement {
		if apps, err = o.PlacedApps(ctx, routesCfg, slices, st, log.WithName("runtime")); err != nil {
			return err
		}
	}
	table := &edge.Table{Apps: apps}
	if o.AppDomain != "" {
		table.Defaults = &edge.DefaultHosts{Domain: o.AppDomain, Apps: apps}
	}
	if err := edge.WatchRoutes(ctx, routeCache, table, log.WithName("routes")); err != nil {
		return err
	}
	if err := edge.WatchMaintenance(ctx, routeCache, table, log.WithName("maintenance")); err != nil {
		return err
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	sopts := edge.ServerOptions{
		Table: table, Storage: storage, HTTPPort: o.PublicHTTPPort, HTTPSPort: o.PublicHTTPSPort,
		Metrics: reg, AccessLog: o.AccessLog, Log: log, CertificateBudget: o.CertificateBudget,
		Observe: observe,
	}
	sopts.ListenHost, _, _ = net.SplitHostPort(o.HTTPListen)
	if o.LocalCADir != "" {
		if sopts.LocalCA, err = edge.LoadOrCreateLocalCA(o.LocalCADir); err != nil {
			return err
		}
	} else {
		sopts.ACME = &edge.ACME{Directory: o.ACMEDirectory, Email: o.ACMEEmail}
		p, err := o.DNS01.Provider()
		if err != nil {
			return err
		}
		if p != nil {
			// The primary that takes the updates is asked for the zone and
			// the record: it has the record first.
			sopts.ACME.DNS01 = &edge.DNS01{Zone: p.Zone, Provider: p, Resolvers: []string{p.Server}}
		}
		if o.ACMECAFile != "" {
			pem, err := os.ReadFile(o.ACMECAFile)
			if err != nil {
				return fmt.Errorf("reading --acme-ca-file: %w", err)
			}
			sopts.ACME.RootCAs = x509.NewCertPool()
			if !sopts.ACME.RootCAs.AppendCertsFromPEM(pem) {
				return fmt.Errorf("--acme-ca-file %s holds no PEM certificate", o.ACMECAFile)
			}
		}
	}
	srv, err := edge.NewServer(sopts)
	if err != nil {
		return err
	}
	defer srv.Close()

	httpL, err := net.Listen("tcp", o.HTTPListen)
	if err != nil {
		return fmt.Errorf("listening for HTTP: %w", err)
	}
	httpsL, err := net.Listen("tcp", o.HTTPSListen)
	if err != nil {
		httpL.Close()
		return fmt.Errorf("listening for HTTPS: %w", err)
	}
	if o.MetricsListen != "" {
		ml, err := net.Listen("tcp", o.MetricsListen)
		if err != nil {
			return fmt.Errorf("listening for metrics: %w", err)
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		if totals != nil {
			mux.Handle(appmetrics.TotalsPath, totals)
		}
		mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
		ms := httpserve.OpsTimeouts().Server(mux)
		go func() { _ = ms.Serve(ml) }()
		defer ms.Close()
	}
	log.Info("Serving", "http", httpL.Addr().String(), "https", httpsL.Addr().String())
	return srv.Serve(ctx, httpL, httpsL)
}

// PlacedApps is the edge's routing table with FollowPlacement, as Run
// builds it: over the clusters that serve apps, the Cluster API clusters
// of the management cluster mgmt reaches (of FleetNamespace, with
// RuntimeKubeconfigs' kubeconfigs when set), each connected when an app
// runs there, and WorkloadCluster's slices (--kubeconfig's
// EndpointSlices; unused, and may be nil, without WorkloadCluster).
// Where each app runs is read from st every placed.DefaultFollowInterval
// until ctx ends (placed.Driver.Follow).
func (o *Options) PlacedApps(ctx context.Context, mgmt *rest.Config, slices *edge.EndpointSliceApps, st *store.Store, log logr.Logger) (*placed.Driver, error) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := clusterv1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	c, err := client.New(mgmt, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("creating the management cluster's client: %w", err)
	}
	var static placed.Static
	if o.WorkloadCluster != "" {
		static = placed.Static{o.WorkloadCluster: {Apps: slices}}
	}
	runtimeSecret, err := command.ParseSecretName("--runtime-kubeconfigs-secret", o.RuntimeKubeconfigs)
	if err != nil {
		return nil, err
	}
	clusters, err := placed.NewKubeClusters(ctx, placed.KubeOptions{Client: c, Namespace: o.FleetNamespace, Static: static, RuntimeSecret: runtimeSecret, Log: log})
	if err != nil {
		return nil, err
	}
	pd, err := placed.New(ctx, placed.Options{Clusters: clusters, Ledger: st, Shared: true, Log: log})
	if err != nil {
		return nil, err
	}
	go pd.Follow(ctx, placed.DefaultFollowInterval)
	return pd, nil
}

func uniqueCaches(a, b cache.Cache) []cache.Cache {
	if a == b {
		return []cache.Cache{a}
	}
	return []cache.Cache{a, b}
}

// Main is bex-edge's command line: it parses args (without the program
// name), then completes, validates and runs the options until ctx ends.
// Logs and help go to out. A refused command line is a
// command.UsageError.
func Main(ctx context.Context, args []string, out io.Writer) error {
	o := NewOptions()
	fs := command.NewFlagSet("bex-edge", out)
	o.AddFlags(fs)
	if done, err := command.Parse(fs, args, o.Complete, o.Validate); done {
		return err
	}
	return o.Run(ctx, command.NewLogger(out))
}
