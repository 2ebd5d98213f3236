package app

import (
	"context"
	"errors"
	"fmt"
	"github.com/prometheus/client_golang/prometheus"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2/textlogger"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"bex.co/bex/apiserver/local"
	"bex.co/bex/controllers"
	"bex.co/bex/controllers/fleetupgrade"
	"bex.co/bex/deploy"
	capicrds "bex.co/bex/deploy/capi-crds"
	localinfracrds "bex.co/bex/deploy/localinfra-crds"
	"bex.co/bex/internal/controlplane"
	"bex.co/bex/internal/domains"
	"bex.co/bex/internal/edge"
	"bex.co/bex/internal/kubeapply"
	"bex.co/bex/internal/localfleet"
	"bex.co/bex/internal/pgserver"
	"bex.co/bex/internal/sandbox"
	"bex.co/bex/internal/store"
	"bex.co/bex/internal/upgrade/verify"
)

// Run starts the platform, writes <state>/env once it is ready, and runs
// until ctx ends; then it stops everything and removes <state>/env.
func (o *Options) Run(ctx context.Context, out io.Writer) (err error) {
	if err := os.MkdirAll(o.StateDir, 0o755); err != nil {
		return fmt.Errorf("creating state directory: %w", err)
	}
	unlock, err := lockState(o.StateDir)
	if err != nil {
		return err
	}
	defer unlock()
	envFile := filepath.Join(o.StateDir, "env")
	_ = os.Remove(envFile) // a file left by a run that was killed is not true any more

	var stops closers
	defer func() {
		_ = os.Remove(envFile)
		stops.close()
	}()

	fmt.Fprintf(out, "bex: state in %s\n", o.StateDir)
	// controller-runtime's logger is set before anything of it runs: the
	// clients made on the way to the controllers log through it too, and an
	// unset logger prints a stack trace once the start takes 30 seconds.
	log := textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(prefixed(out, ""))))
	ctrl.SetLogger(log)
	if o.UnsafeNoSandbox {
		fmt.Fprintln(out, "bex: WARNING: --unsafe-no-sandbox: tenant apps run as plain processes of this user and can read and reach everything it can; use it on a single-user machine only")
	} else if err := sandbox.Check(""); err != nil {
		return fmt.Errorf("tenant apps run in runc sandboxes, and this machine cannot run them: %w; on a single-user machine, --unsafe-no-sandbox runs them unconfined", err)
	}
	cp, err := o.startControlPlane(ctx, out, &stops)
	if err != nil {
		return err
	}
	cfg := cp.RESTConfig()
	var fleet *localFleet
	if !o.NoLocalFleet {
		if fleet, err = newLocalFleet(o.StateDir, o.NodeBinary, out); err != nil {
			return err
		}
		// After the controller manager stops: its processes stop, their
		// files stay for the next run.
		stops.push(fleet.host.Close)
		if o.LocalFleetStarted != nil {
			o.LocalFleetStarted(fleet.host)
		}
		if o.ManagedPlane {
			if err := fleet.host.RegisterPlane(planeName, localfleet.Plane{Etcd: cp.Etcd(), LoadBalancer: cp.LoadBalancer(), Peers: cp.WiredPeers}); err != nil {
				return err
			}
			version := cp.APIServer(firstAPIServer).Version
			fleet.afterStart = func(ctx context.Context) error {
				kube, err := client.New(cfg, client.Options{Scheme: controllers.NewScheme()})
				if err != nil {
					return err
				}
				if err := takeOverPlane(ctx, kube, cp, version, o.NoMVP, out); err != nil {
					return fmt.Errorf("Cluster API did not take the control plane over (the platform runs on its first kube-apiserver; the next make run tries again): %w", err)
				}
				return nil
			}
		}
	}

	dbURL, st, err := o.openStore(ctx, out, &stops)
	if err != nil {
		return err
	}

	kube, err := client.New(cfg, client.Options{Scheme: controllers.NewScheme()})
	if err != nil {
		return fmt.Errorf("creating a client: %w", err)
	}
	binDir := ""
	if exe, err := os.Executable(); err == nil {
		binDir = filepath.Dir(exe)
	}
	bk, err := o.startBuildKit(ctx, out, &stops)
	if err != nil {
		return err
	}
	var ready atomic.Bool
	s := &starter{Options: o, ctx: ctx, kube: kube, st: st, binDir: binDir, stops: &stops, log: log, out: out, fleet: fleet, metrics: prometheus.NewRegistry()}
	svc, err := s.startServices(bk, &ready)
	if err != nil {
		return err
	}

	mgrDone, err := s.startControllers(cfg, svc)
	if err != nil {
		return err
	}

	env := []envVar{
		{"BEX_STATE_DIR", o.StateDir},
		{"BEX_KUBECONFIG", cp.KubeconfigPath()},
		{"BEX_APISERVER", cp.Endpoint()},
		{"BEX_DATABASE_URL", dbURL},
	}
	env = append(env, svc.env...)
	if err := writeEnv(envFile, env); err != nil {
		return err
	}
	ready.Store(true)
	o.printReady(out, cp, dbURL, svc, envFile)
	if fleet != nil {
		fleet.start(ctx, cp.KubeconfigPath())
		stops.push(fleet.stopManagers)
	}

	select {
	case <-ctx.Done():
		fmt.Fprintln(out, "bex: stopping")
		return nil
	case err := <-mgrDone:
		mgrDone <- err
		return fmt.Errorf("controller manager stopped: %w", err)
	}
}

// startControlPlane starts etcd and the apiservers (behind a load balancer
// when there are several), installs the platform's and Cluster API's CRDs,
// and registers the scheduler API.
func (o *Options) startControlPlane(ctx context.Context, out io.Writer, stops *closers) (*controlplane.ControlPlane, error) {
	if err := o.checkPlaneUnmanaged(); err != nil {
		return nil, err
	}
	specs := make([]controlplane.APIServerSpec, max(o.APIServers, 1))
	for i := range specs {
		specs[i] = controlplane.APIServerSpec{Name: fmt.Sprintf("kube-apiserver-%d", i+1), Version: o.KubeVersion, NoMVP: o.NoMVP}
	}
	if o.ManagedPlane {
		// One kube-apiserver, as kubeadm's nodes have it, behind the load
		// balancer the machines of the cluster that takes the plane over
		// join; at the newest version they ran.
		version, err := o.planeVersion()
		if err != nil {
			return nil, err
		}
		specs[0].Version, specs[0].ExtraArgs = version, localfleet.PlaneAPIServerArgs()
	}
	cp, err := controlplane.Start(ctx, controlplane.Options{
		DataDir:       filepath.Join(o.StateDir, "controlplane"),
		APIServers:    specs,
		LoadBalancer:  len(specs) > 1 || o.ManagedPlane,
		APIServerPort: o.APIServerPort,
		Log:           prefixed(out, "controlplane: "),
		Fsync:         true,
	})
	if err != nil {
		return nil, fmt.Errorf("starting the control plane: %w", err)
	}
	stops.push(cp.Stop)
	if o.ControlPlaneStarted != nil {
		o.ControlPlaneStarted(cp)
	}
	cfg := cp.RESTConfig()
	crds, err := kubeapply.InstallCRDs(ctx, cfg, deploy.CRDs())
	if err != nil {
		return nil, fmt.Errorf("installing CRDs: %w", err)
	}
	fmt.Fprintf(out, "bex: CRDs installed: %s\n", strings.Join(crds, ", "))
	// Cluster API's CRDs, so that the operator console, bex upgrade and the
	// FleetUpgrade controller work here as on a management cluster (with no
	// workload cluster until one is created). The local fleet's managers
	// install their own, a superset, which stay once installed.
	installed := false
	if !o.NoLocalFleet {
		if installed, err = capiCRDsInstalled(ctx, cfg); err != nil {
			return nil, err
		}
	}
	if !installed {
		if _, err := kubeapply.InstallCRDs(ctx, cfg, capicrds.CRDs()); err != nil {
			return nil, fmt.Errorf("installing Cluster API's CRDs: %w", err)
		}
	}
	if !o.NoLocalFleet {
		if _, err := kubeapply.InstallCRDs(ctx, cfg, localinfracrds.CRDs()); err != nil {
			return nil, fmt.Errorf("installing the local provider's CRDs: %w", err)
		}
	}
	sched, err := local.Start(ctx, local.Options{ControlPlane: cp, Dir: filepath.Join(o.StateDir, "bex-apiserver")})
	if err != nil {
		return nil, fmt.Errorf("starting bex-apiserver: %w", err)
	}
	stops.push(func() { _ = sched.Stop() })
	fmt.Fprintln(out, "bex: scheduler API registered (scheduling.bex.co/v1alpha1)")
	return cp, nil
}

// startControllers runs the controller manager in this process with the
// services' releaser, certificates and routing table, and returns once its
// caches have synced; the channel gets the manager's end.
func (s *starter) startControllers(cfg *rest.Config, svc *services) (chan error, error) {
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 controllers.NewScheme(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		// A process may run the platform more than once (the continuity
		// suite does, one scenario after the other).
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		return nil, fmt.Errorf("creating the controller manager: %w", err)
	}
	deps := controllers.Deps{
		Releases: svc.pipeline, Schedule: true,
		DNS: domains.ResolverAt(s.DNSResolver), EdgeAddresses: edgeAddresses, AppDomain: appDomain, Certificates: svc.certs,
		ReservedHostnames: s.ReservedHostnames,
		FleetUpgrades: &fleetupgrade.Reconciler{
			Verifier:           fleetupgrade.RunVerifier{Options: verify.Options{Always: verify.Baseline(), RemoveStaleLeases: true}},
			ManagementVerifier: fleetupgrade.ManagementRunVerifier{Options: verify.Options{Always: verify.Baseline(), RemoveStaleLeases: true}},
			Records:            s.st,
			Metrics:            s.metrics,
		},
	}
	if s.fleet != nil {
		deps.LocalFleet = s.fleet.host
		deps.ServedApps = s.st
	}
	if err := controllers.Setup(mgr, deps); err != nil {
		return nil, fmt.Errorf("setting up controllers: %w", err)
	}
	mgrCtx, cancelMgr := context.WithCancel(s.ctx)
	mgrDone := make(chan error, 1)
	go func() { mgrDone <- mgr.Start(mgrCtx) }()
	s.stops.push(func() { cancelMgr(); <-mgrDone })
	syncCtx, cancelSync := context.WithTimeout(s.ctx, time.Minute)
	synced := mgr.GetCache().WaitForCacheSync(syncCtx)
	cancelSync()
	if !synced {
		return nil, errors.New("controller manager caches did not sync within a minute")
	}
	if err := edge.WatchRoutes(mgrCtx, mgr.GetCache(), svc.table, s.log.WithName("edge")); err != nil {
		return nil, err
	}
	if err := edge.WatchMaintenance(mgrCtx, mgr.GetCache(), svc.table, s.log.WithName("edge")); err != nil {
		return nil, err
	}
	return mgrDone, nil
}

// printReady prints where everything listens.
func (o *Options) printReady(out io.Writer, cp *controlplane.ControlPlane, dbURL string, svc *services, envFile string) {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(out, "bex: ready")
	// The version the plane started at: with a managed plane, the newest
	// its machines ran, which may be past --kube-version.
	kubeVersion := o.KubeVersion
	if servers := cp.APIServers(); len(servers) > 0 {
		kubeVersion = servers[0].Version
	}
	fmt.Fprintf(tw, "  kube-apiserver v%s\t%s\n", kubeVersion, cp.Endpoint())
	if o.APIServers > 1 {
		fmt.Fprintf(tw, "  \t(a load balancer in front of %d apiservers)\n", o.APIServers)
	}
	fmt.Fprintf(tw, "  etcd\t%s\n", cp.EtcdURL())
	fmt.Fprintf(tw, "  postgres\t%s\n", redact(dbURL))
	names := append(controllers.Names(), fleetupgrade.ControllerName)
	if !o.NoLocalFleet {
		names = append(names, controllers.LocalFleetNames()...)
	}
	fmt.Fprintf(tw, "  controller manager\tin-process: %s\n", strings.Join(names, ", "))
	for _, kv := range svc.summary {
		fmt.Fprintf(tw, "  %s\t%s\n", kv[0], kv[1])
	}
	if !o.NoLocalFleet {
		fmt.Fprintf(tw, "  local fleet\tclusters in %s; Cluster API's managers start in the background (logs in %s)\n",
			filepath.Join(o.StateDir, "fleet"), filepath.Join(o.StateDir, "capi", "logs"))
	}
	fmt.Fprintf(tw, "  kubeconfig\t%s\n", cp.KubeconfigPath())
	fmt.Fprintf(tw, "  environment\tsource %s\n", envFile)
	tw.Flush()
}

// openStore finds or starts the database, opens the store on it
// (migrating it) and fails the builds the last stop cut short.
func (o *Options) openStore(ctx context.Context, out io.Writer, stops *closers) (string, *store.Store, error) {
	dbURL, stopDB, err := o.database(ctx, out)
	if err != nil {
		return "", nil, err
	}
	stops.push(stopDB)
	st, err := store.Open(ctx, dbURL)
	if err != nil {
		return "", nil, fmt.Errorf("opening the store: %w", err)
	}
	stops.push(st.Close)
	st = st.WithLimits(store.Limits{BuildLogLines: o.BuildLogLines})
	fmt.Fprintln(out, "bex: store migrated")
	// This process runs every build of the platform: one still running was
	// cut short when the last one stopped (killed, or the machine went
	// down). Its branch did not move and the release before it serves.
	if n, err := st.FailAbandonedBuilds(ctx, abandonedBuild); err != nil {
		return "", nil, err
	} else if n > 0 {
		fmt.Fprintf(out, "bex: %d build(s) cut short by the last stop marked failed\n", n)
	}
	return dbURL, st, nil
}

// database returns the URL of the platform's database: DatabaseURL when
// set, else a private server's (started here) "bex" database.
func (o *Options) database(ctx context.Context, out io.Writer) (string, func(), error) {
	if o.DatabaseURL != "" {
		fmt.Fprintf(out, "bex: using the database at %s\n", redact(o.DatabaseURL))
		return o.DatabaseURL, func() {}, nil
	}
	dir := filepath.Join(o.StateDir, "postgres")
	portFile := filepath.Join(o.StateDir, "postgres.port")
	port := o.PostgresPort
	if port == 0 {
		if data, err := os.ReadFile(portFile); err == nil {
			port, _ = strconv.Atoi(strings.TrimSpace(string(data)))
		}
	}
	logFile, err := os.OpenFile(filepath.Join(o.StateDir, "postgres.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return "", nil, err
	}
	// Nothing else restarts the private server: the supervisor starts it
	// again on the same port when it dies, and the platform's pools
	// reconnect. Running apps keep serving meanwhile (the edge does not ask
	// the database for what it has).
	srv, err := pgserver.Supervise(ctx, pgserver.Options{DataDir: dir, Port: port, Log: logFile}, func(e pgserver.Event) {
		if e.Err != nil {
			fmt.Fprintf(out, "bex: the private Postgres is down: %v\n", firstLine(e.Err.Error()))
			return
		}
		fmt.Fprintf(out, "bex: the private Postgres is back on 127.0.0.1:%d (restart %d)\n", e.Port, e.Restarts)
	})
	if err != nil {
		logFile.Close()
		return "", nil, fmt.Errorf("starting a private Postgres in %s (or set DATABASE_URL to use another): %w", dir, err)
	}
	stop := func() { _ = srv.Stop(); logFile.Close() }
	if err := os.WriteFile(portFile, []byte(strconv.Itoa(srv.Port())+"\n"), 0o644); err != nil {
		stop()
		return "", nil, err
	}
	fmt.Fprintf(out, "bex: private Postgres on 127.0.0.1:%d, data in %s\n", srv.Port(), dir)
	if err := ensureDatabase(ctx, srv.URL("postgres"), "bex"); err != nil {
		stop()
		return "", nil, err
	}
	return srv.URL("bex"), stop, nil
}

func ensureDatabase(ctx context.Context, adminURL, name string) error {
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return fmt.Errorf("connecting to Postgres: %w", err)
	}
	defer conn.Close(ctx)
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return fmt.Errorf("looking for database %s: %w", name, err)
	}
	if exists {
		return nil
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return fmt.Errorf("creating database %s: %w", name, err)
	}
	return nil
}

type envVar struct{ name, value string }

// writeEnv writes a shell-sourceable file atomically.
func writeEnv(path string, vars []envVar) error {
	var b strings.Builder
	b.WriteString("# Written by bex-embedded once the platform is ready; removed when it stops.\n")
	for _, v := range vars {
		fmt.Fprintf(&b, "export %s='%s'\n", v.name, strings.ReplaceAll(v.value, "'", `'\''`))
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(b.String()), 0o600); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return os.Rename(tmp, path)
}

// lockState makes sure one platform at a time runs on a state directory.
func lockState(dir string) (func(), error) {
	path := filepath.Join(dir, "lock")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		pid, _ := os.ReadFile(path)
		f.Close()
		return nil, fmt.Errorf("another bex-embedded (pid %s) runs on %s: stop it first", strings.TrimSpace(string(pid)), dir)
	}
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
}

// redact hides a URL's password.
func redact(u string) string {
	if i := strings.Index(u, "://"); i >= 0 {
		rest := u[i+3:]
		if at := strings.Index(rest, "@"); at >= 0 {
			if colon := strings.Index(rest[:at], ":"); colon >= 0 {
				return u[:i+3] + rest[:colon] + ":***" + rest[at:]
			}
		}
	}
	return u
}

// prefixed writes each line to w with a prefix.
func prefixed(w io.Writer, prefix string) io.Writer { return &prefixWriter{w: w, prefix: prefix} }

type prefixWriter struct {
	w      io.Writer
	prefix string
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	for _, line := range strings.SplitAfter(string(b), "\n") {
		if line == "" {
			continue
		}
		if _, err := io.WriteString(p.w, p.prefix+line); err != nil {
			return 0, err
		}
	}
	return len(b), nil
}

// abandonedBuild is the error of a build the platform stopped during.
const abandonedBuild = "the platform stopped during this build (killed or restarted); the branch was not updated and the previous release kept serving: push again"

// firstLine is s up to its first newline.
func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
