package app

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/pflag"

	"bex.co/bex/cmd/internal/command"
	"bex.co/bex/cmd/internal/workload"
	"bex.co/bex/internal/appmetrics"
	"bex.co/bex/internal/httpserve"
	"bex.co/bex/internal/quota"
	"bex.co/bex/internal/runtime"
	"bex.co/bex/web/api"
	"bex.co/bex/web/dashboard"
)

// Options are bex-web's flags.
type Options struct {
	command.PlatformOptions
	Listen    string
	OpsListen string
	// GitBase is the git receiver's public base URL; apps' remotes are
	// <GitBase>/<tenant>/<app>.git.
	GitBase       string
	EdgeAddresses []string
	// ReservedHostnames are names the platform serves itself, refused as
	// custom hostnames (the controller manager's --reserved-hostname must
	// be the same).
	ReservedHostnames []string
	Runtime           workload.Options
	// Quotas are the tenants' default quotas of apps and routes, which the
	// API checks, and those the API shows a tenant.
	Quotas *quota.Defaults
	// CookieKeyFile holds the dashboard's session cookie key: 32 random
	// bytes, or 64 hexadecimal digits. Empty: no dashboard, only the API.
	CookieKeyFile string
	// MaxLogStreamsPerTenant caps the logs one tenant follows at once
	// through this server.
	MaxLogStreamsPerTenant int
	// RunHeartbeat is how often the replica says it is alive for its
	// one-off runs; RunLostAfter how long a replica may go unseen before
	// its runs are marked lost.
	RunHeartbeat, RunLostAfter time.Duration
	// EdgeMetrics is the host:port of the edges' metrics listeners (a
	// headless Service's name resolves to every bex-edge Pod), whose
	// appmetrics.TotalsPath the apps' series read their requests from,
	// with the bearer token in EdgeMetricsTokenFile. Empty: the series
	// have no requests.
	EdgeMetrics          []string
	EdgeMetricsTokenFile string
	// AppMetricsInterval is the resolution of the apps' series.
	AppMetricsInterval time.Duration

	// Dashboard, when set, serves every path outside /api/v1/ on Listen
	// instead of the dashboard Run builds from CookieKeyFile.
	Dashboard http.Handler
}

// NewOptions returns the defaults.
func NewOptions() *Options {
	quotas := quota.NewDefaults()
	return &Options{
		PlatformOptions: command.NewPlatformOptions(),
		Listen:          ":8080", OpsListen: ":9090",
		Runtime:                workload.Options{WorkDir: "/var/lib/bex/work", Quotas: quotas},
		MaxLogStreamsPerTenant: api.DefaultMaxLogStreamsPerTenant,
		RunHeartbeat:           api.DefaultRunHeartbeat,
		RunLostAfter:           api.DefaultRunLostAfter,
		AppMetricsInterval:     appmetrics.DefaultInterval,
		Quotas:                 quotas,
	}
}

// AddFlags binds the options to fs.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	o.PlatformOptions.AddFlags(fs, "Apps, Routes, FleetUpgrades, tenants' namespaces", "")
	fs.StringVar(&o.Listen, "listen", o.Listen, "Address of the API (/api/v1/, health at /api/v1/healthz) and the dashboard (every other path)")
	fs.StringVar(&o.OpsListen, "ops-listen", o.OpsListen, "Address of /metrics, /healthz (liveness) and /readyz; empty turns it off")
	fs.StringVar(&o.GitBase, "git-base", o.GitBase, "Public base URL of the git receiver, e.g. https://git.example.com; apps' remotes are <base>/<tenant>/<app>.git (required)")
	fs.StringArrayVar(&o.EdgeAddresses, "edge-address", o.EdgeAddresses, "Public IP address of the edge, offered for custom domains' A/AAAA records; repeatable")
	fs.StringArrayVar(&o.ReservedHostnames, "reserved-hostname", o.ReservedHostnames, "A name the platform serves itself (API, dashboard, git, registry), refused as a custom hostname; *.NAME reserves NAME and everything under it; repeatable (the apps' domain is always reserved)")
	fs.StringVar(&o.CookieKeyFile, "cookie-key-file", o.CookieKeyFile, "File with the dashboard's session cookie key (32 random bytes, or 64 hex digits), the same on every replica; empty: no dashboard")
	fs.IntVar(&o.MaxLogStreamsPerTenant, "max-log-streams-per-tenant", o.MaxLogStreamsPerTenant, "How many logs (of builds and apps) one tenant may follow at once through this replica; the next is answered 429")
	fs.DurationVar(&o.RunHeartbeat, "run-heartbeat", o.RunHeartbeat, "How often this replica records that it is alive for the one-off runs it runs, and marks lost the runs of replicas gone")
	fs.DurationVar(&o.RunLostAfter, "run-lost-after", o.RunLostAfter, "How long a replica may go unseen before the one-off runs it ran are marked lost (at least three --run-heartbeat)")
	fs.StringArrayVar(&o.EdgeMetrics, "edge-metrics", o.EdgeMetrics, "host:port of edges' metrics listeners (a headless Service's name: each of its addresses is one bex-edge), read every --app-metrics-interval for the apps' requests and latency; repeatable; none: the apps' series have no requests")
	fs.StringVar(&o.EdgeMetricsTokenFile, "edge-metrics-token-file", o.EdgeMetricsTokenFile, "File with the bearer token of the edges' "+appmetrics.TotalsPath+" (bex-edge's --app-metrics-token-file); required with --edge-metrics")
	fs.DurationVar(&o.AppMetricsInterval, "app-metrics-interval", o.AppMetricsInterval, "Resolution of the apps' series (CPU, memory, restarts, requests, latency; an hour of them is kept); saved series of another interval are not loaded")
	o.Runtime.AddFlags(fs)
	o.Quotas.AddFlags(fs)
}

// Validate checks the options.
func (o *Options) Validate() error {
	var errs []error
	if err := o.PlatformOptions.Validate("tenants, tokens, builds and releases"); err != nil {
		errs = append(errs, err)
	}
	if o.GitBase == "" {
		errs = append(errs, errors.New("--git-base is required: the API tells users their apps' git remotes"))
	}
	for _, a := range o.EdgeAddresses {
		if _, err := netip.ParseAddr(a); err != nil {
			errs = append(errs, fmt.Errorf("--edge-address %q is not an IP address", a))
		}
	}
	if o.MaxLogStreamsPerTenant < 1 {
		errs = append(errs, fmt.Errorf("--max-log-streams-per-tenant %d: want 1 or more", o.MaxLogStreamsPerTenant))
	}
	if o.RunHeartbeat <= 0 || o.RunLostAfter < 3*o.RunHeartbeat {
		errs = append(errs, fmt.Errorf("--run-heartbeat %s, --run-lost-after %s: want a heartbeat above 0 and at least three of them before a replica is lost", o.RunHeartbeat, o.RunLostAfter))
	}
	for _, e := range o.EdgeMetrics {
		if host, port, err := net.SplitHostPort(e); err != nil || host == "" || port == "" {
			errs = append(errs, fmt.Errorf("--edge-metrics %q: want host:port, like bex-edge-metrics-pods.bex.svc:9090", e))
		}
	}
	if len(o.EdgeMetrics) > 0 {
		if o.EdgeMetricsTokenFile == "" {
			errs = append(errs, errors.New("--edge-metrics needs --edge-metrics-token-file: the edges serve the apps' requests to no one without their token"))
		}
	}
	if o.AppMetricsInterval < 5*time.Second {
		errs = append(errs, fmt.Errorf("--app-metrics-interval %s: want 5s or more (the kube driver keeps a node's stats summary 2s)", o.AppMetricsInterval))
	}
	errs = append(errs, o.Runtime.Validate()...)
	errs = append(errs, o.Quotas.Validate())
	return errors.Join(errs...)
}

// readCookieKey reads a 32-byte key, raw or as 64 hexadecimal digits.
func readCookieKey(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(data) == 32 {
		return data, nil
	}
	if key, err := hex.DecodeString(strings.TrimSpace(string(data))); err == nil && len(key) == 32 {
		return key, nil
	}
	return nil, fmt.Errorf("%s holds %d bytes: want 32 random bytes or 64 hex digits (openssl rand -hex 32)", path, len(data))
}

// Run serves until ctx ends.
func (o *Options) Run(ctx context.Context, log logr.Logger) error {
	var cookieKey []byte
	if o.Dashboard == nil && o.CookieKeyFile != "" {
		key, err := readCookieKey(o.CookieKeyFile)
		if err != nil {
			return fmt.Errorf("--cookie-key-file: %w", err)
		}
		cookieKey = key
	}
	c, err := command.Open(ctx, o.DatabaseURL, o.Kubeconfig)
	if err != nil {
		return err
	}
	defer c.Store.Close()
	reg := command.NewOpsRegistry()
	o.Runtime.Metrics = reg
	rt, err := o.Runtime.NewRuntime(ctx, c.Store, c.Kube, log)
	if err != nil {
		return err
	}
	seriesCtx, stopSeries := context.WithCancel(ctx)
	series, seriesDone, err := o.startSeries(seriesCtx, c.Store, c.Kube, rt.Driver, log.WithName("appmetrics"))
	if err != nil {
		stopSeries()
		return err
	}
	// The series' last save, before the store closes.
	defer func() { stopSeries(); seriesDone() }()
	// The kube and placed drivers stop lost runs' Pods and sweep ended ones.
	reaper, _ := rt.Driver.(runtime.RunReaper)
	apiSrv, err := api.New(api.Options{
		Store: c.Store, Kube: c.Kube, Deployer: rt.Releaser, Logs: api.RuntimeLogs{Driver: rt.Driver}, Instances: api.RuntimeInstances{Driver: rt.Driver},
		GitBase: o.GitBase, AppDomain: o.Runtime.AppDomain, EdgeAddresses: o.EdgeAddresses,
		Log: log.WithName("api"), ReadinessChecks: []func(context.Context) error{c.KubeReady},
		MaxLogStreamsPerTenant: o.MaxLogStreamsPerTenant, Quotas: o.Quotas,
		ReservedHostnames: o.ReservedHostnames,
		RunHeartbeat:      o.RunHeartbeat, RunLostAfter: o.RunLostAfter, RunReaper: reaper,
		AppMetrics: series,
	})
	if err != nil {
		return err
	}

	l, err := net.Listen("tcp", o.Listen)
	if err != nil {
		return fmt.Errorf("listening for the API: %w", err)
	}
	if cookieKey != nil {
		// The dashboard calls the API on this same listener.
		addr := l.Addr().(*net.TCPAddr)
		host := addr.IP
		if host.IsUnspecified() {
			host = net.IPv4(127, 0, 0, 1)
		}
		self := "http://" + net.JoinHostPort(host.String(), strconv.Itoa(addr.Port))
		d, err := dashboard.New(dashboard.Options{API: self, CookieKey: cookieKey, Log: log.WithName("dashboard")})
		if err != nil {
			l.Close()
			return err
		}
		o.Dashboard = d.Handler()
	}
	ctx, cancel := context.WithCancel(ctx)
	kept := make(chan struct{})
	defer func() { cancel(); <-kept }()
	go func() {
		defer close(kept)
		if err := apiSrv.Run(ctx); err != nil {
			log.Error(err, "One-off runs are no longer kept alive")
		}
	}()
	errc := make(chan error, 2)
	servers := 1
	go func() {
		errc <- command.Serve(ctx, l, api.ServerTimeouts().Server(o.handler(apiSrv.Handler())), 10*time.Second)
	}()
	if o.OpsListen != "" {
		ol, err := net.Listen("tcp", o.OpsListen)
		if err != nil {
			cancel()
			<-errc
			return fmt.Errorf("listening for metrics and probes: %w", err)
		}
		servers++
		go func() {
			errc <- command.Serve(ctx, ol, httpserve.OpsTimeouts().Server(command.OpsHandler(reg, c.StoreReady, c.KubeReady)), time.Second)
		}()
		log.Info("Serving", "api", l.Addr().String(), "ops", ol.Addr().String())
	} else {
		log.Info("Serving", "api", l.Addr().String())
	}
	var errs []error
	for range servers {
		if err := <-errc; err != nil {
			errs = append(errs, err)
		}
		cancel()
	}
	return errors.Join(errs...)
}

// handler routes /api/v1/ to the API and the rest to the dashboard.
func (o *Options) handler(apiHandler http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle(api.Prefix+"/", apiHandler)
	if o.Dashboard != nil {
		mux.Handle("/", o.Dashboard)
	}
	return mux
}

// Main is bex-web's command line: it parses args (without the program
// name), validates and runs the options until ctx ends. Logs and help go
// to out. A refused command line is a command.UsageError.
func Main(ctx context.Context, args []string, out io.Writer) error {
	o := NewOptions()
	fs := command.NewFlagSet("bex-web", out)
	o.AddFlags(fs)
	if done, err := command.Parse(fs, args, o.Validate); done {
		return err
	}
	return o.Run(ctx, command.NewLogger(out))
}
