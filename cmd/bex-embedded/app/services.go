package app

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	mathrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"bex.co/bex/apiserver/local"
	"bex.co/bex/builder/build"
	"bex.co/bex/builder/gitaccess"
	"bex.co/bex/builder/gitserver"
	"bex.co/bex/builder/pipeline"
	"bex.co/bex/builder/release"
	"bex.co/bex/cmd/internal/command"
	appctrl "bex.co/bex/controllers/app"
	"bex.co/bex/internal/appmetrics"
	"bex.co/bex/internal/certstore"
	"bex.co/bex/internal/edge"
	"bex.co/bex/internal/fleetstate"
	"bex.co/bex/internal/httpserve"
	"bex.co/bex/internal/kubebin"
	"bex.co/bex/internal/quota"
	"bex.co/bex/internal/registry"
	"bex.co/bex/internal/runtime"
	"bex.co/bex/internal/runtime/kube"
	"bex.co/bex/internal/runtime/placed"
	"bex.co/bex/internal/runtime/process"
	"bex.co/bex/internal/runtime/runtimemetrics"
	"bex.co/bex/internal/sandbox"
	"bex.co/bex/internal/secretfile"
	"bex.co/bex/internal/store"
	"bex.co/bex/web/api"
	"bex.co/bex/web/dashboard"
)

// devTenant is the tenant make run creates for its user.
const devTenant = "dev"

// edgeAddresses are where the embedded edge listens, the addresses a
// Route's hostname must resolve to.
var edgeAddresses = []string{"127.0.0.1"}

// appDomain is where apps answer in embedded mode: <app>-<tenant>.localhost
// resolves to the loopback address without any DNS set-up.
const appDomain = "localhost"

// services are the platform's own servers in embedded mode.
type services struct {
	pipeline *pipeline.Pipeline
	// table is the edge's routing table; Routes are fed into it once the
	// controller manager's cache runs.
	table *edge.Table
	// certs is the edge's view of certificate state, for the Route
	// controller.
	certs *edge.Certificates
	// metrics holds the edge's per-route metrics.
	metrics *prometheus.Registry
	env     []envVar
	summary [][2]string
}

// closers is what to stop when the platform stops, in the order things
// were started: close runs them in reverse.
type closers []func()

// push adds f, to run before everything pushed earlier.
func (c *closers) push(f func()) { *c = append(*c, f) }

// close runs the closers, the last pushed first, and forgets them.
func (c *closers) close() {
	for i := len(*c) - 1; i >= 0; i-- {
		(*c)[i]()
	}
	*c = nil
}

// starter is what starting each service needs: the options, the store and
// the management cluster, where the platform's binaries are, the ports of
// the last run, the logger, and the stack each service's shutdown goes on.
type starter struct {
	*Options
	ctx    context.Context
	kube   client.Client
	st     *store.Store
	binDir string
	ports  *ports
	stops  *closers
	log    logr.Logger
	// out is make run's output, where long work shows its progress.
	out io.Writer
	// fleet is the local fleet; nil without one.
	fleet *localFleet
	// metrics receives the metrics of every service of this run; the
	// metrics listener serves it with controller-runtime's registry.
	metrics *prometheus.Registry
}

// listen listens on loopback, on the port name had last time when there
// was one, else on a free port below the kernel's ephemeral range, and
// remembers the port.
func (s *starter) listen(name string) (net.Listener, error) {
	port := s.ports.Ports[name]
	var l net.Listener
	var err error
	if port == 0 {
		if l, err = listenStable("127.0.0.1", ephemeralLow()); err != nil {
			return nil, fmt.Errorf("listening for %s: %w", name, err)
		}
	} else if l, err = net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port))); err != nil {
		return nil, fmt.Errorf("listening for %s on port %d, used last time (free it or delete %s): %w", name, port, s.ports.path, err)
	}
	s.ports.Ports[name] = l.Addr().(*net.TCPAddr).Port
	return l, s.ports.save()
}

// serve serves srv on l until the platform stops, then shuts it down.
func (s *starter) serve(name string, l net.Listener, srv *http.Server) {
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error(err, "Server stopped", "server", name)
		}
	}()
	s.stops.push(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
}

// startServices starts the registry, builder, runtime, edge, git receiver
// and API, each on a port remembered in <state>/ports.json, and pushes
// their shutdown on s.stops. The builder talks to the buildkitd bk names;
// the API is ready once ready is set.
func (s *starter) startServices(bk build.Options, ready *atomic.Bool) (*services, error) {
	ports, err := loadPorts(filepath.Join(s.StateDir, "ports.json"))
	if err != nil {
		return nil, err
	}
	s.ports = ports
	reg, err := s.startRegistry()
	if err != nil {
		return nil, err
	}
	apps, err := s.startApps(bk, reg)
	if err != nil {
		return nil, err
	}
	series, err := s.startAppMetrics(apps.runtime)
	if err != nil {
		return nil, err
	}
	e, err := s.startEdge(apps.runtime, series)
	if err != nil {
		return nil, err
	}
	pl, err := s.newPipeline(apps, e)
	if err != nil {
		return nil, err
	}
	git, err := s.startGit(pl)
	if err != nil {
		return nil, err
	}
	apiURL, err := s.startAPI(pl, apps.runtime, git, e, series, ready)
	if err != nil {
		return nil, err
	}
	metrics, err := s.startMetrics()
	if err != nil {
		return nil, err
	}
	devToken, err := s.ensureTenant(s.ctx, s.kube, s.st, devTenant, filepath.Join(s.StateDir, "dev-token"), false)
	if err != nil {
		return nil, err
	}
	opToken, err := s.ensureTenant(s.ctx, s.kube, s.st, "", filepath.Join(s.StateDir, "operator-token"), true)
	if err != nil {
		return nil, err
	}
	httpURL := fmt.Sprintf("http://127.0.0.1:%d", e.httpPort)
	httpsURL := fmt.Sprintf("https://127.0.0.1:%d", e.httpsPort)
	return &services{
		pipeline: pl, table: e.table, certs: e.server.Certificates(), metrics: e.metrics,
		env: []envVar{
			{"BEX_API", apiURL}, {"BEX_DASHBOARD", apiURL + "/"}, {"BEX_GIT", git.httpBase}, {"BEX_GIT_SSH", git.sshURL}, {"BEX_TOKEN", devToken},
			{"BEX_OPERATOR_TOKEN", opToken}, {"BEX_HTTP", httpURL}, {"BEX_HTTPS", httpsURL}, {"BEX_CA", e.ca.CertFile()},
			{"BEX_DOMAIN", fmt.Sprintf("%s:%d", appDomain, e.httpsPort)},
			{"BEX_METRICS", metrics.url}, {"BEX_METRICS_TOKEN_FILE", metrics.tokenFile},
		},
		summary: [][2]string{
			{"dashboard", apiURL + "/ (sign in with BEX_TOKEN, or BEX_OPERATOR_TOKEN for the console)"}, {"API", apiURL + api.Prefix}, {"git (HTTP)", git.httpBase + "/<tenant>/<app>.git"}, {"git (SSH)", git.sshURL + "/<tenant>/<app>.git"},
			{"edge (HTTPS)", fmt.Sprintf("https://<app>-<tenant>.%s:%d", appDomain, e.httpsPort)},
			{"edge (HTTP)", fmt.Sprintf("http://<app>-<tenant>.%s:%d (redirects to HTTPS)", appDomain, e.httpPort)},
			{"local CA", e.ca.CertFile() + " (curl --cacert)"}, {"registry", reg.addr + " (user " + registry.Username + ", token in " + reg.tokenFile + ")"},
			{"sandboxes", apps.sandboxes.describe()},
			{"metrics", metrics.url + " (Prometheus; bearer token in " + metrics.tokenFile + ")"},
		},
	}, nil
}

// registryService is the platform registry as the builder and the
// releaser reach it.
type registryService struct {
	addr, token, tokenFile string
}

// registryConfigPath is the docker config.json that opens the platform
// registry, for the local fleet's node agents.
func registryConfigPath(state string) string { return filepath.Join(state, "registry-config.json") }

// startRegistry serves the platform registry. Every request presents its
// token, which only the builder, the releaser and the local fleet's node
// agents get.
func (s *starter) startRegistry() (*registryService, error) {
	tokenFile := filepath.Join(s.StateDir, "registry-token")
	token, _, err := secretfile.LoadOrCreate(tokenFile)
	if err != nil {
		return nil, fmt.Errorf("the registry's token: %w", err)
	}
	reg, err := registry.New(filepath.Join(s.StateDir, "registry"), token)
	if err != nil {
		return nil, fmt.Errorf("opening the registry: %w", err)
	}
	l, err := s.listen("registry")
	if err != nil {
		return nil, err
	}
	// The local fleet's node agents pull the apps' images with it.
	if err := registry.WriteDockerConfig(registryConfigPath(s.StateDir), l.Addr().String(), token); err != nil {
		return nil, err
	}
	// Blobs stream both ways for as long as they take: headers and idle
	// connections only are bounded.
	s.serve("registry", l, httpserve.Timeouts{ReadHeader: 10 * time.Second, Idle: 120 * time.Second}.Server(reg.Handler()))
	return &registryService{addr: l.Addr().String(), token: token, tokenFile: tokenFile}, nil
}

// appsService is where tenant code runs: the sandboxes, the builder in
// them, and the runtime driver of the apps, which runs each app on the
// cluster it is placed on (the process runtime, as the static cluster
// "local", or a Cluster API cluster of the local fleet).
type appsService struct {
	sandboxes *sandboxes
	builder   *build.Builder
	runtime   *placed.Driver
}

// startApps makes the sandboxes, the builder (pushing to reg, handing
// Dockerfiles to the buildkitd bk names) and the process runtime driver.
func (s *starter) startApps(bk build.Options, reg *registryService) (*appsService, error) {
	sb, err := s.sandboxes(s.binDir)
	if err != nil {
		return nil, err
	}
	s.stops.push(sb.close)
	// Go's compiled standard library is the same for every platform of
	// this machine and Go version: kept with the pinned builds in the
	// user's cache directory, so that a new state directory (a test's, a
	// fresh make run) does not compile it again.
	var goStd string
	if uc, err := os.UserCacheDir(); err == nil {
		goStd = filepath.Join(uc, "bex", "go-std")
	}
	builder, err := build.New(build.Options{
		WorkRoot: filepath.Join(s.StateDir, "builds"), Registry: reg.addr, RegistryAuth: registry.Auth(reg.token), GoStdCacheDir: goStd,
		Log:          s.log.WithName("builder"),
		BuildKitAddr: bk.BuildKitAddr, BuildCtl: bk.BuildCtl, NoBuildKitReason: bk.NoBuildKitReason, BuildKitLimits: bk.BuildKitLimits,
		Sandbox: sb.builds, SandboxPATH: sb.buildPATH, SandboxLimits: sandbox.Limits{CPUMilli: s.buildCPUMilli},
		WorkDiskSize: s.buildDisk, CacheDiskSize: s.buildCacheDisk, MaxCheckoutBytes: s.MaxCheckoutBytes,
	})
	if err != nil {
		return nil, fmt.Errorf("creating the builder: %w", err)
	}
	// Go's standard library, compiled once for every tenant's first Go
	// build; a push that comes first waits for it (builder/build/gostd.go).
	warmCtx, stopWarm := context.WithCancel(s.ctx)
	warmed := make(chan struct{})
	go func() {
		defer close(warmed)
		if err := builder.WarmGo(warmCtx, prefixed(s.out, "builder: ")); err != nil && warmCtx.Err() == nil {
			s.log.Error(err, "Warming the Go build cache; Go builds compile the standard library themselves")
		}
	}()
	// The warm-up ends, and its compilers with it, before the platform's
	// directories may go.
	s.stops.push(func() { stopWarm(); <-warmed })
	// Before the sandboxes close: the builds' disks are unmounted.
	s.stops.push(func() {
		if err := builder.Close(); err != nil {
			s.log.Error(err, "Unmounting the builds' disks")
		}
	})
	rt := process.New(process.Options{LogDir: filepath.Join(s.StateDir, "logs", "apps"), Sandbox: sb.apps})
	s.stops.push(func() { _ = rt.Close() })
	if err := s.metrics.Register(rt.Collector()); err != nil {
		return nil, fmt.Errorf("registering the runtime's metrics: %w", err)
	}
	if sb.apps != nil {
		s.log.Info("Tenant sandboxes ready", "apps", sb.apps.Subnet().String(), "builds", sb.builds.Subnet().String())
	}
	pd, err := s.placedRuntime(rt)
	if err != nil {
		return nil, err
	}
	return &appsService{sandboxes: sb, builder: builder, runtime: pd}, nil
}

// placedRuntime is the driver that runs each app where it is placed: rt
// as the static cluster of the scheduler's fleet, and a kube driver per
// Cluster API cluster. The clusters that served apps when the platform
// last stopped are connected in the background, so that the edge routes
// to them again.
func (s *starter) placedRuntime(rt *process.Driver) (*placed.Driver, error) {
	static, err := fleetstate.ParseStatic(local.DefaultLocalCluster)
	if err != nil {
		return nil, err
	}
	log := s.log.WithName("runtime")
	clusters, err := placed.NewKubeClusters(s.ctx, placed.KubeOptions{
		Client: s.kube, Static: placed.Static{static.Name: {Driver: rt, Apps: rt}}, Log: log,
	})
	if err != nil {
		return nil, err
	}
	s.stops.push(clusters.Close)
	pd, err := placed.New(s.ctx, placed.Options{Clusters: clusters, Ledger: s.st, Log: log})
	if err != nil {
		return nil, err
	}
	go pd.SweepLeftovers(s.ctx, placed.SweepInterval)
	// The instances of the apps on the local fleet's clusters (the kube
	// driver), beside the process driver's of the static cluster.
	instances, err := runtimemetrics.New(runtimemetrics.Options{
		Driver: kube.DriverLabel, Sources: pd.InstancesReaders, Log: log,
	})
	if err != nil {
		return nil, err
	}
	if err := s.metrics.Register(instances); err != nil {
		return nil, fmt.Errorf("registering the runtime's metrics: %w", err)
	}
	for _, c := range pd.ServingClusters() {
		go func() {
			if _, err := clusters.Driver(s.ctx, c); err != nil {
				log.Error(err, "Connecting to a cluster that serves apps", "cluster", c)
			}
		}()
	}
	return pd, nil
}

// edgeService is the running edge.
type edgeService struct {
	server              *edge.Server
	table               *edge.Table
	metrics             *prometheus.Registry
	ca                  *edge.LocalCA
	httpPort, httpsPort int
}

// url is an app's URL on the edge.
func (e *edgeService) url(tenant, app string) string {
	return fmt.Sprintf("https://%s:%d", edge.Hostname(tenant, app, appDomain), e.httpsPort)
}

// startEdge serves HTTP and HTTPS for the apps rt runs, with certificates
// from the local CA and the store.
func (s *starter) startEdge(rt edge.Apps, series *appmetrics.Sampler) (*edgeService, error) {
	httpL, err := s.listen("edge")
	if err != nil {
		return nil, err
	}
	httpsL, err := s.listen("edge-https")
	if err != nil {
		return nil, err
	}
	e := &edgeService{
		table: &edge.Table{Defaults: &edge.DefaultHosts{Domain: appDomain, Apps: rt}}, metrics: s.metrics,
		httpPort: httpL.Addr().(*net.TCPAddr).Port, httpsPort: httpsL.Addr().(*net.TCPAddr).Port,
	}
	if e.ca, err = edge.LoadOrCreateLocalCA(filepath.Join(s.StateDir, "ca")); err != nil {
		return nil, err
	}
	certs, err := certstore.New(s.st.Pool(), certstore.Options{})
	if err != nil {
		return nil, err
	}
	e.server, err = edge.NewServer(edge.ServerOptions{
		Table: e.table, Storage: certs, LocalCA: e.ca, HTTPPort: e.httpPort, HTTPSPort: e.httpsPort,
		ListenHost: "127.0.0.1", Metrics: e.metrics, Log: s.log.WithName("edge"), CertificateBudget: s.CertificateBudget,
		Observe: func(o edge.Observation) {
			if o.Matched && o.Route.App != "" {
				series.Observe(o.Route.Tenant, o.Route.App, o.Status, o.Duration)
			}
		},
	})
	if err != nil {
		return nil, fmt.Errorf("creating the edge: %w", err)
	}
	ctx, stop := context.WithCancel(context.WithoutCancel(s.ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := e.server.Serve(ctx, httpL, httpsL); err != nil {
			s.log.Error(err, "Edge stopped")
		}
	}()
	s.stops.push(func() { stop(); <-done; e.server.Close() })
	return e, nil
}

// startAppMetrics samples every app's series (internal/appmetrics) from
// rt and, once the edge hands them over, its requests, until the platform
// stops. The series are kept in the store: the last run's are loaded
// first, and the stop waits for the last save.
func (s *starter) startAppMetrics(rt runtime.Driver) (*appmetrics.Sampler, error) {
	series, err := appmetrics.New(appmetrics.Options{Apps: appmetrics.KubeApps(s.kube), Runtime: rt, Saved: s.st, Log: s.log.WithName("appmetrics")})
	if err != nil {
		return nil, err
	}
	if err := series.Load(s.ctx, time.Now()); err != nil {
		// The platform runs without the last run's series.
		s.log.Error(err, "Loading the apps' saved series")
	}
	ctx, stop := context.WithCancel(s.ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		series.Run(ctx)
	}()
	s.stops.push(func() { stop(); <-done })
	return series, nil
}

// newPipeline is the releaser over the apps' runtime and the pipeline that
// builds pushes for it.
func (s *starter) newPipeline(apps *appsService, e *edgeService) (*pipeline.Pipeline, error) {
	rel, err := release.New(release.Options{
		Store: s.st, Kube: s.kube, Runtime: apps.runtime, Keychain: apps.builder.Keychain(),
		ReleasesDir: filepath.Join(s.StateDir, "releases"), BinDir: s.binDir, URL: e.url, Log: s.log.WithName("releaser"),
		ReleaseRetention: s.ReleaseRetention, FollowPlacement: true, Quotas: s.quotas(), Metrics: s.metrics,
		Fits: appctrl.SchedulerPlacer{Client: s.kube},
	})
	if err != nil {
		return nil, err
	}
	return pipeline.New(pipeline.Options{Releaser: rel, Builder: apps.builder, Quotas: s.quotas(), Metrics: s.metrics, Log: s.log.WithName("pipeline")})
}

// gitService is where tenants push.
type gitService struct {
	httpBase, sshURL string
}

// startGit serves the git receiver over smart HTTP and SSH; pushes go to
// pl.
func (s *starter) startGit(pl *pipeline.Pipeline) (*gitService, error) {
	git, err := gitserver.New(gitserver.Options{
		Root: filepath.Join(s.StateDir, "git"), Auth: gitaccess.Auth{Store: s.st}, Repos: gitaccess.Repos{Kube: s.kube},
		Deployer: pl, MaxPushBytes: s.MaxPushBytes, Log: s.log.WithName("git"),
		Quota: quota.RepoQuota{Defaults: s.quotas(), Store: s.st},
	})
	if err != nil {
		return nil, err
	}
	httpL, err := s.listen("git-http")
	if err != nil {
		return nil, err
	}
	srv := gitserver.HTTPTimeouts().Server(git.HTTPHandler())
	go func() { _ = srv.Serve(httpL) }()
	s.stops.push(func() { _ = srv.Close() })
	sshL, err := s.listen("git-ssh")
	if err != nil {
		return nil, err
	}
	hostKey, err := gitserver.LoadOrCreateHostKey(filepath.Join(s.StateDir, "ssh_host_ed25519_key"))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(s.ctx)
	go func() { _ = git.ServeSSH(ctx, sshL, hostKey) }()
	s.stops.push(func() { cancel(); sshL.Close() })
	return &gitService{httpBase: "http://" + httpL.Addr().String(), sshURL: "ssh://git@" + sshL.Addr().String()}, nil
}

// startAPI serves the API and the dashboard on one listener, and returns
// its URL. The API is ready once ready is set and the apiserver answers.
func (s *starter) startAPI(pl *pipeline.Pipeline, rt *placed.Driver, git *gitService, e *edgeService, series *appmetrics.Sampler, ready *atomic.Bool) (string, error) {
	apiSrv, err := api.New(api.Options{
		Store: s.st, Kube: s.kube, Deployer: pl, Logs: api.RuntimeLogs{Driver: rt}, Instances: api.RuntimeInstances{Driver: rt}, AppMetrics: series,
		GitBase: git.httpBase, AppDomain: fmt.Sprintf("%s:%d", appDomain, e.httpsPort), EdgeAddresses: edgeAddresses,
		Log: s.log.WithName("api"), MaxLogStreamsPerTenant: s.MaxLogStreamsPerTenant, Quotas: s.quotas(),
		ReservedHostnames: s.ReservedHostnames,
		LocalFleet:        s.apiLocalFleet(),
		RunReaper:         rt,
		ReadinessChecks: []func(context.Context) error{
			func(context.Context) error {
				if !ready.Load() {
					return errors.New("the platform is starting")
				}
				return nil
			},
			func(ctx context.Context) error { return command.KubeAnswers(ctx, s.kube) },
		},
	})
	if err != nil {
		return "", err
	}
	keepCtx, stopKeeping := context.WithCancel(s.ctx)
	kept := make(chan struct{})
	go func() {
		defer close(kept)
		if err := apiSrv.Run(keepCtx); err != nil {
			s.log.Error(err, "One-off runs are no longer kept alive")
		}
	}()
	s.stops.push(func() { stopKeeping(); <-kept })
	l, err := s.listen("api")
	if err != nil {
		return "", err
	}
	apiURL := "http://" + l.Addr().String()
	cookieKey, err := loadCookieKey(filepath.Join(s.StateDir, "dashboard-cookie-key"))
	if err != nil {
		return "", err
	}
	traffic := edge.NewTrafficRecorder(e.metrics, 360)
	ctx, stop := context.WithCancel(s.ctx)
	go traffic.Run(ctx, 10*time.Second)
	s.stops.push(stop)
	var localVersions []string
	if s.fleet != nil {
		localVersions = kubebin.KubeVersions()
	}
	dash, err := dashboard.New(dashboard.Options{
		API: apiURL, CookieKey: cookieKey, Traffic: edgeTraffic{traffic}, LocalFleetVersions: localVersions, Log: s.log.WithName("dashboard"),
	})
	if err != nil {
		return "", err
	}
	s.serve("api", l, api.ServerTimeouts().Server(dash.WithAPI(apiSrv.Handler())))
	return apiURL, nil
}

// metricsService is the Prometheus endpoint of the platform.
type metricsService struct {
	url, tokenFile string
}

// startMetrics serves /metrics on loopback: this run's metrics and
// controller-runtime's (the controllers', the workqueues', Go's and the
// process's). Like every platform service it asks for a credential, a
// bearer token kept in <state>/metrics-token, since tenants' processes
// may reach loopback (docs/security.md).
func (s *starter) startMetrics() (*metricsService, error) {
	tokenFile := filepath.Join(s.StateDir, "metrics-token")
	token, _, err := secretfile.LoadOrCreate(tokenFile)
	if err != nil {
		return nil, fmt.Errorf("the metrics token: %w", err)
	}
	l, err := s.listen("metrics")
	if err != nil {
		return nil, err
	}
	h := promhttp.HandlerFor(prometheus.Gatherers{s.metrics, ctrlmetrics.Registry}, promhttp.HandlerOpts{})
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", command.BearerOnly(token, h))
	s.serve("metrics", l, httpserve.OpsTimeouts().Server(mux))
	return &metricsService{url: "http://" + l.Addr().String() + "/metrics", tokenFile: tokenFile}, nil
}

// loadCookieKey reads the dashboard's cookie key, creating it once.
func loadCookieKey(path string) ([]byte, error) {
	if data, err := os.ReadFile(path); err == nil && len(data) == 32 {
		return data, nil
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	if err := os.WriteFile(path, key, 0o600); err != nil {
		return nil, fmt.Errorf("writing the dashboard's cookie key: %w", err)
	}
	return key, nil
}

// ensureTenant makes sure a tenant (or, with operator, an operator user)
// exists and that the token kept in tokenFile is valid, creating both when
// not, and returns the token.
func (o *Options) ensureTenant(ctx context.Context, kube client.Client, st *store.Store, name, tokenFile string, operator bool) (string, error) {
	if data, err := os.ReadFile(tokenFile); err == nil {
		secret := strings.TrimSpace(string(data))
		if _, err := st.AuthenticateToken(ctx, secret); err == nil {
			return secret, nil
		}
	}
	var tenantID, userID string
	if operator {
		u, err := st.CreateUser(ctx, store.NewUser{Email: "operator@" + appDomain, Role: store.RoleOperator})
		if err != nil && !errors.Is(err, store.ErrConflict) {
			return "", fmt.Errorf("creating the operator: %w", err)
		}
		if err != nil {
			return "", fmt.Errorf("the operator exists but %s is missing or refused: delete the state directory to start over: %w", tokenFile, err)
		}
		userID = u.ID
	} else {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{api.TenantLabel: name}}}
		if err := kube.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
			return "", fmt.Errorf("creating namespace %s: %w", name, err)
		}
		t, err := st.GetTenantByName(ctx, name)
		if errors.Is(err, store.ErrNotFound) {
			t, err = st.CreateTenant(ctx, name)
		}
		if err != nil {
			return "", fmt.Errorf("creating tenant %s: %w", name, err)
		}
		tenantID = t.ID
	}
	secret, _, err := st.CreateToken(ctx, tenantID, userID, "make-run")
	if err != nil {
		return "", fmt.Errorf("creating a token: %w", err)
	}
	if err := os.WriteFile(tokenFile, []byte(secret+"\n"), 0o600); err != nil {
		return "", err
	}
	return secret, nil
}

// stablePortsFrom is the lowest port listenStable picks.
const stablePortsFrom = 10000

// listenStable listens on host at a free port from stablePortsFrom up to
// below low, the first port of the kernel's ephemeral range. A port the
// next start listens on again must not be ephemeral: between two runs the
// kernel hands ephemeral ports out as the source port of any outgoing
// connection (and to every ":0" listener), and the port is then taken.
// With no room below low it listens on ":0".
func listenStable(host string, low int) (net.Listener, error) {
	if low-stablePortsFrom < 1000 {
		return net.Listen("tcp", net.JoinHostPort(host, "0"))
	}
	var err error
	for range 100 {
		var l net.Listener
		if l, err = net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(stablePortsFrom+mathrand.IntN(low-stablePortsFrom)))); err == nil {
			return l, nil
		}
	}
	return nil, fmt.Errorf("no free port from %d to %d: %w", stablePortsFrom, low-1, err)
}

// ephemeralLow returns the first port of the kernel's ephemeral range
// (net.ipv4.ip_local_port_range), or Linux's default, 32768, when it
// cannot be read.
func ephemeralLow() int {
	data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	fields := strings.Fields(string(data))
	if len(fields) == 0 {
		return 32768
	}
	low, err := strconv.Atoi(fields[0])
	if err != nil || low <= 0 {
		return 32768
	}
	return low
}

// ports remembers which port each service listened on, so that URLs in
// .bex/env and image references in the registry stay valid across runs.
type ports struct {
	path  string
	Ports map[string]int `json:"ports"`
}

func loadPorts(path string) (*ports, error) {
	p := &ports{path: path, Ports: map[string]int{}}
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return p, nil
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(data, p); err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	if p.Ports == nil {
		p.Ports = map[string]int{}
	}
	return p, nil
}

func (p *ports) save() error {
	data, _ := json.MarshalIndent(p, "", "  ")
	return os.WriteFile(p.path, data, 0o644)
}

var _ io.Closer = (*process.Driver)(nil)

// apiLocalFleet is the local fleet as the API takes it: nil (not a typed
// nil) without one.
func (s *starter) apiLocalFleet() api.LocalFleet {
	if s.fleet == nil {
		return nil
	}
	return s.fleet
}
