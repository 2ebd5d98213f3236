// Package apitest runs the real platform API (package web/api) for tests:
// on a fresh Postgres database from pgtest and a real control plane from
// cptest (plus the Cluster API v1beta2 CRDs of deploy/capi-crds, which the
// fleet-upgrade routes plan over, and with a LocalFleet the local
// provider's CRDs and Cluster API's KubeadmConfigTemplate, which a local
// cluster's workers have), behind an httptest server, with an operator's token, a
// Releaser that records each rollback and config release as a release in
// the store (it deploys nothing; its one-off runs are real processes of
// this machine, run by the process runtime without a sandbox, or in
// tenant sandboxes with Options.Sandbox, where a run asked on a terminal
// has one), a LogSource the test feeds, and a real process runtime whose
// apps the API's instances show (a test deploys into it what bex ps
// should see); PlaceApp writes an App's placement as the App
// controller would, and FinishAppDeletion lets a deleted App go as it
// does (no App controller runs: the finalizer the API sets holds a
// deleted App until then). Tests of the API, the CLI and the dashboard use it.
//
// Packages that use it call pgtest.Main from TestMain.
package apitest

import (
	"bex.co/bex/internal/appmetrics"
	"context"
	"io/fs"
	"net/http/httptest"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	fleetv1alpha1 "bex.co/bex/apis/fleet/v1alpha1"
	infrav1 "bex.co/bex/apis/infrastructure/v1alpha1"
	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
	capicrds "bex.co/bex/deploy/capi-crds"
	installcrds "bex.co/bex/deploy/install-crds"
	localinfracrds "bex.co/bex/deploy/localinfra-crds"
	"bex.co/bex/internal/controlplane"
	"bex.co/bex/internal/kubeapply"
	"bex.co/bex/internal/pgtest"
	bexruntime "bex.co/bex/internal/runtime"
	"bex.co/bex/internal/runtime/process"
	"bex.co/bex/internal/sandbox"
	"bex.co/bex/internal/sandbox/sandboxtest"
	"bex.co/bex/internal/store"
	"bex.co/bex/test/platformtest"
	"bex.co/bex/web/api"
	"bex.co/bex/web/api/apiclient"
)

// Defaults of the servers Start runs.
const (
	GitBase   = "http://git.bex.test:7000"
	AppDomain = "apps.bex.test"
	// EdgeAddress is the edge's public address the API tells tenants to
	// point A records at.
	EdgeAddress = "192.0.2.10"
	// ReservedHostname is a name the platform serves itself (its
	// registry), which no tenant may add.
	ReservedHostname = "registry.bex-platform.test"
)

// Env is a running API and what it runs on.
type Env struct {
	// URL is the httptest server's URL; the API is under URL + api.Prefix.
	URL      string
	Server   *api.Server
	Store    *store.Store
	Kube     client.Client
	Releaser *Releaser
	// Logs are the lines the API serves as apps' logs, unless
	// Options.RuntimeLogs.
	Logs *Logs
	// Runtime is the process driver the API reads instances from; it
	// runs what a test deploys into it, as host processes (in sandboxes
	// with Options.Sandbox).
	Runtime *process.Driver
	// Metrics keeps the apps' series the API answers; a test samples it
	// (Sample) and feeds it requests (Observe) as the edge would.
	Metrics *appmetrics.Sampler
	// OperatorToken is the secret of an operator's token.
	OperatorToken string

	mu       sync.Mutex
	notReady error // what the server's one readiness check returns
	// newServer makes an API server with the Env's options, changed by
	// mod when it is not nil.
	newServer func(mod func(*api.Options)) (*api.Server, error)
}

// serve starts an API server with the Env's options, changed by mod when
// it is not nil, on an httptest server, and its Run (heartbeats and
// sweeps of one-off runs); die closes the httptest server and ends Run,
// and runs when t ends if not before.
func (e *Env) serve(t testing.TB, mod func(*api.Options)) (srv *api.Server, url string, die func()) {
	t.Helper()
	srv, err := e.newServer(mod)
	if err != nil {
		t.Fatalf("creating API server: %v", err)
	}
	hs := httptest.NewServer(srv.Handler())
	ctx, cancel := context.WithCancel(context.Background())
	kept := make(chan struct{})
	go func() {
		defer close(kept)
		if err := srv.Run(ctx); err != nil {
			t.Errorf("the API server's Run: %v", err)
		}
	}()
	var once sync.Once
	die = func() {
		once.Do(func() {
			hs.Close()
			cancel()
			<-kept
		})
	}
	t.Cleanup(die)
	return srv, hs.URL, die
}

// AnotherServer starts a second API server on the Env's store, cluster,
// Releaser and runtime, as a second replica of a cluster install is, and
// returns its URL: what one holds in memory (a run it runs) the other
// does not.
func (e *Env) AnotherServer(t testing.TB) string {
	t.Helper()
	return e.AnotherServerWith(t, nil)
}

// AnotherServerWith is AnotherServer with the Env's API options changed
// by mod.
func (e *Env) AnotherServerWith(t testing.TB, mod func(*api.Options)) string {
	t.Helper()
	_, url, _ := e.serve(t, mod)
	return url
}

// DyingServer is AnotherServer that also returns die, which makes the
// server stop answering as a replica whose machine went away does: its
// listener closes and it no longer heartbeats nor sweeps. What it runs
// runs on (the runtime is the Env's), as a run cut off with its machine
// would; its stop watch still reads the store.
func (e *Env) DyingServer(t testing.TB) (url string, die func()) {
	t.Helper()
	_, url, die = e.serve(t, nil)
	return url, die
}

// SetNotReady makes the server's readiness check fail with err; nil makes
// it pass.
func (e *Env) SetNotReady(err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.notReady = err
}

// NewScheme returns the scheme of the API's cluster client: core,
// platform.bex.co, fleet.bex.co and infrastructure.bex.co kinds, and
// Cluster API's core, KubeadmControlPlane and kubeadm bootstrap kinds
// (v1beta2).
func NewScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		corev1.AddToScheme, platformv1alpha1.AddToScheme, fleetv1alpha1.AddToScheme,
		clusterv1.AddToScheme, controlplanev1.AddToScheme, bootstrapv1.AddToScheme, infrav1.AddToScheme,
	} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return s
}

// Start runs the API on a new database and on cp, with the Cluster API
// CRDs installed on cp, and stops it when t ends. Tests that share cp must
// use distinct tenant names (and FleetUpgrade and Cluster names).
func Start(t *testing.T, cp *controlplane.ControlPlane) *Env {
	t.Helper()
	return StartWith(t, cp, Options{})
}

// Options change what StartWith runs.
type Options struct {
	// DatabaseURL is the database of the store; empty: a new one from
	// pgtest.
	DatabaseURL string
	// MaxLogStreamsPerTenant is the API's option of that name.
	MaxLogStreamsPerTenant int
	// RunKeepAlive is the API's option of that name.
	RunKeepAlive time.Duration
	// WrapKube, when set, wraps the cluster client the API is given
	// (Env.Kube stays unwrapped), so that a test can act between the
	// API's reads and writes as a controller would.
	WrapKube func(client.Client) client.Client
	// LocalFleet, when set, is the API's local fleet; nil runs the API
	// without one, as the cluster install does.
	LocalFleet api.LocalFleet
	// RuntimeLogs serves the apps' logs from Env.Runtime (what a detached
	// run writes there) instead of Env.Logs.
	RuntimeLogs bool
	// ClusterAPIRunning says the real Cluster API managers run on the
	// control plane and installed their CRDs (localinfratest): the
	// project's v1beta2-only copies are not applied over them.
	ClusterAPIRunning bool
	// RunHeartbeat and RunLostAfter are the API's options of those names.
	RunHeartbeat, RunLostAfter time.Duration
	// RunReaper is the API's option of that name.
	RunReaper bexruntime.RunReaper
	// Sandbox runs Env.Runtime's instances and the Releaser's one-off
	// commands in tenant sandboxes (internal/sandbox, a Manager of the
	// test's own), as the platform runs them (make run): a run asked on a
	// terminal has a pseudo-terminal of the size asked, which its resizes
	// reach. Where the machine cannot run sandboxes the test is skipped
	// (sandboxtest.Require; in CI it fails): such a test calls
	// sandboxtest.Require before it starts anything. Without it they
	// are processes of this machine, with no terminal (its output goes
	// to stdout), which start faster.
	Sandbox bool
}

// StartWith is Start with options.
func StartWith(t *testing.T, cp *controlplane.ControlPlane, opts Options) *Env {
	t.Helper()
	ctx := context.Background()
	if !opts.ClusterAPIRunning {
		if _, err := kubeapply.InstallCRDs(ctx, cp.RESTConfig(), capicrds.CRDs()); err != nil {
			t.Fatalf("installing Cluster API CRDs: %v", err)
		}
	}
	if opts.LocalFleet != nil {
		if _, err := kubeapply.InstallCRDs(ctx, cp.RESTConfig(), localinfracrds.CRDs()); err != nil {
			t.Fatalf("installing the local provider's CRDs: %v", err)
		}
		if !opts.ClusterAPIRunning {
			// A local cluster with workers has a KubeadmConfigTemplate.
			const name = "bootstrap.cluster.x-k8s.io_kubeadmconfigtemplates.yaml"
			data, err := fs.ReadFile(installcrds.CRDs(), name)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := kubeapply.InstallCRDs(ctx, cp.RESTConfig(), fstest.MapFS{name: {Data: data}}); err != nil {
				t.Fatalf("installing the KubeadmConfigTemplate CRD: %v", err)
			}
		}
	}
	dbURL := opts.DatabaseURL
	if dbURL == "" {
		dbURL = pgtest.NewDatabase(t)
	}
	st, err := store.Open(ctx, dbURL)
	if err != nil {
		t.Fatalf("opening store: %v", err)
	}
	t.Cleanup(st.Close)
	kube, err := client.New(cp.RESTConfig(), client.Options{Scheme: NewScheme()})
	if err != nil {
		t.Fatalf("creating cluster client: %v", err)
	}
	rtOpts := process.Options{LogDir: t.TempDir(), BackoffMin: 50 * time.Millisecond, BackoffMax: 200 * time.Millisecond,
		DrainDelay: 100 * time.Millisecond, GracePeriod: 5 * time.Second}
	if opts.Sandbox {
		// Closed after the driver (cleanups run last first).
		rtOpts.Sandbox = sandboxtest.New(t, sandbox.Options{StateDir: t.TempDir()})
	}
	rt := process.New(rtOpts)
	t.Cleanup(func() { rt.Close() })
	e := &Env{Store: st, Kube: kube, Releaser: &Releaser{Store: st, Kube: kube, Runner: rt, RunDir: t.TempDir()}, Logs: &Logs{}, Runtime: rt}
	if e.Metrics, err = appmetrics.New(appmetrics.Options{Apps: appmetrics.KubeApps(kube), Runtime: rt}); err != nil {
		t.Fatal(err)
	}
	apiKube := kube
	if opts.WrapKube != nil {
		apiKube = opts.WrapKube(kube)
	}
	var logs api.LogSource = e.Logs
	if opts.RuntimeLogs {
		logs = api.RuntimeLogs{Driver: rt}
	}
	apiOpts := api.Options{
		Store:         st,
		Kube:          apiKube,
		Deployer:      e.Releaser,
		Logs:          logs,
		Instances:     api.RuntimeInstances{Driver: rt},
		AppMetrics:    e.Metrics,
		GitBase:       GitBase,
		AppDomain:     AppDomain,
		EdgeAddresses: []string{EdgeAddress},
		Log:           testr.New(t),

		MaxLogStreamsPerTenant: opts.MaxLogStreamsPerTenant,
		RunKeepAlive:           opts.RunKeepAlive,
		RunHeartbeat:           opts.RunHeartbeat,
		RunLostAfter:           opts.RunLostAfter,
		RunReaper:              opts.RunReaper,
		ReservedHostnames:      []string{ReservedHostname},
		LocalFleet:             opts.LocalFleet,
		ReadinessChecks: []func(context.Context) error{func(context.Context) error {
			e.mu.Lock()
			defer e.mu.Unlock()
			return e.notReady
		}},
	}
	e.newServer = func(mod func(*api.Options)) (*api.Server, error) {
		o := apiOpts
		if mod != nil {
			mod(&o)
		}
		return api.New(o)
	}
	e.Server, e.URL, _ = e.serve(t, nil)

	op, err := st.CreateUser(ctx, store.NewUser{Email: "ops@bex.test", Role: store.RoleOperator})
	if err != nil {
		t.Fatalf("creating operator: %v", err)
	}
	if e.OperatorToken, _, err = st.CreateToken(ctx, "", op.ID, "ops"); err != nil {
		t.Fatalf("creating operator token: %v", err)
	}
	return e
}

// TenantToken creates a tenant directly (namespace, row, token) and returns
// its token's secret.
func (e *Env) TenantToken(t testing.TB, name string) (store.Tenant, string) {
	t.Helper()
	ctx := context.Background()
	ns := &corev1.Namespace{}
	ns.Name = name
	if err := e.Kube.Create(ctx, ns); err != nil {
		t.Fatalf("creating namespace %s: %v", name, err)
	}
	tenant, err := e.Store.CreateTenant(ctx, name)
	if err != nil {
		t.Fatalf("creating tenant %s: %v", name, err)
	}
	secret, _, err := e.Store.CreateToken(ctx, tenant.ID, "", "test")
	if err != nil {
		t.Fatalf("creating token of %s: %v", name, err)
	}
	return tenant, secret
}

// Member invites email with role into the tenant of adminToken (a token
// that acts as an admin) through the API, accepts the invitation as the
// invitee does, and returns the new member's first token.
func (e *Env) Member(t testing.TB, adminToken, email, role string) string {
	t.Helper()
	ctx := context.Background()
	admin, err := apiclient.New(e.URL, adminToken, nil)
	if err != nil {
		t.Fatal(err)
	}
	inv, err := admin.Invite(ctx, apiclient.InviteRequest{Email: email, Role: role})
	if err != nil {
		t.Fatalf("inviting %s as %s: %v", email, role, err)
	}
	anyone, err := apiclient.New(e.URL, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	a, err := anyone.AcceptInvitation(ctx, apiclient.AcceptInvitationRequest{Code: inv.Code})
	if err != nil {
		t.Fatalf("accepting the invitation of %s: %v", email, err)
	}
	return a.Token
}

// Rollback is one call of Releaser.Rollback.
type Rollback struct {
	Tenant, App string
	To          int
	Actor       string
}

// Releaser is an api.Releaser that records each rollback and config
// release as a release in the store, as the runtime's would, and remembers
// the calls. It deploys nothing: its restarts replace nothing
// (releaser.go). Its one-off runs are real, run by Runner (Env.Runtime)
// in RunDir as the current release's directory.
type Releaser struct {
	Store *store.Store
	// Kube reaches the Apps, whose status.currentRelease a config release
	// sets and a restart reads.
	Kube client.Client
	// Runner runs the one-off commands in RunDir.
	Runner bexruntime.Runner
	RunDir string

	mu       sync.Mutex
	calls    []Rollback
	configs  []ConfigRelease
	restarts []Restart
	// processes are what every release runs, for Restart; nil: web.
	processes []string
	// fail, when set, makes ReleaseConfig and Restart fail as a rollout
	// that never became healthy.
	fail error
	// runsUnsupported makes Run answer as a runtime that runs no one-off
	// commands.
	runsUnsupported bool
	// noInput makes Run refuse input and a terminal, as the kube driver.
	noInput bool
}

// Rollback records a rollback release.
func (r *Releaser) Rollback(ctx context.Context, tenant, app string, to int, actor string) (int, error) {
	r.mu.Lock()
	r.calls = append(r.calls, Rollback{Tenant: tenant, App: app, To: to, Actor: actor})
	r.mu.Unlock()
	t, err := r.Store.GetTenantByName(ctx, tenant)
	if err != nil {
		return 0, err
	}
	rel, err := r.Store.CreateRollbackRelease(ctx, t.ID, app, to, actor)
	if err != nil {
		return 0, err
	}
	return rel.Number, nil
}

// Calls returns the rollbacks asked for so far.
func (r *Releaser) Calls() []Rollback {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Rollback(nil), r.calls...)
}

// Logs is an api.LogSource that serves the lines the test gives it: Lines
// for the tail, and for followers whatever is sent on Follow.
type Logs struct {
	mu sync.Mutex
	// lines are every app's past lines, by "tenant/app".
	lines map[string][]api.LogLine
	// follow receives lines for followers.
	follow chan api.LogLine
}

// Add appends past lines of tenant's app.
func (l *Logs) Add(tenant, app string, lines ...api.LogLine) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lines == nil {
		l.lines = map[string][]api.LogLine{}
	}
	l.lines[tenant+"/"+app] = append(l.lines[tenant+"/"+app], lines...)
}

// Follow returns the channel whose lines go to followers, each line to
// one of them.
func (l *Logs) Follow() chan<- api.LogLine { return l.followChan() }

func (l *Logs) followChan() chan api.LogLine {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.follow == nil {
		l.follow = make(chan api.LogLine)
	}
	return l.follow
}

// Logs sends the last tail lines, then with follow what Follow receives.
func (l *Logs) Logs(ctx context.Context, tenant, app string, tail int, follow bool) (<-chan api.LogLine, error) {
	l.mu.Lock()
	past := l.lines[tenant+"/"+app]
	past = past[max(0, len(past)-tail):]
	past = append([]api.LogLine(nil), past...)
	l.mu.Unlock()
	var live <-chan api.LogLine
	if follow {
		live = l.followChan()
	}
	out := make(chan api.LogLine)
	go func() {
		defer close(out)
		for _, line := range past {
			select {
			case out <- line:
			case <-ctx.Done():
				return
			}
		}
		if live == nil {
			return
		}
		for {
			select {
			case line := <-live:
				select {
				case out <- line:
				case <-ctx.Done():
					return
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

var (
	_ api.Releaser  = (*Releaser)(nil)
	_ api.LogSource = (*Logs)(nil)
)

// CreateCluster creates a Cluster API (v1beta2) Cluster in namespace ns
// (created when missing) with labels, and its KubeadmControlPlane of the
// same name that runs version, as a management cluster holds them; no
// controller acts on them.
func (e *Env) CreateCluster(t testing.TB, ns, name, version string, labels map[string]string) {
	t.Helper()
	ctx := context.Background()
	if err := e.Kube.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating namespace %s: %v", ns, err)
	}
	cluster := &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: clusterv1.ClusterSpec{
			ControlPlaneRef: clusterv1.ContractVersionedObjectReference{APIGroup: controlplanev1.GroupVersion.Group, Kind: "KubeadmControlPlane", Name: name},
		},
	}
	kcp := &controlplanev1.KubeadmControlPlane{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: controlplanev1.KubeadmControlPlaneSpec{
			Replicas: ptr.To[int32](3),
			Version:  version,
			MachineTemplate: controlplanev1.KubeadmControlPlaneMachineTemplate{Spec: controlplanev1.KubeadmControlPlaneMachineTemplateSpec{
				InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "HCloudMachineTemplate", Name: name},
			}},
		},
	}
	for _, obj := range []client.Object{cluster, kcp} {
		if err := e.Kube.Create(ctx, obj); err != nil {
			t.Fatalf("creating %T %s/%s: %v", obj, ns, name, err)
		}
	}
}

// PlaceApp writes the status the App controller writes when it placed
// the tenant's app, or found no cluster for it: status.cluster and the
// Placed condition, True with message when placed, else False.
func (e *Env) PlaceApp(t testing.TB, tenant, app, cluster string, placed bool, message string) {
	t.Helper()
	if err := platformtest.PlaceApp(context.Background(), e.Kube, tenant, app, cluster, placed, message); err != nil {
		t.Fatal(err)
	}
}

// FinishAppDeletion does what the App controller does once it stopped a
// deleted App: it takes the controller's finalizer off, and the App goes.
// The test fails when the tenant's app is not being deleted.
func (e *Env) FinishAppDeletion(t testing.TB, tenant, app string) {
	t.Helper()
	ctx := context.Background()
	obj := &platformv1alpha1.App{}
	if err := e.Kube.Get(ctx, client.ObjectKey{Namespace: tenant, Name: app}, obj); err != nil || obj.DeletionTimestamp.IsZero() {
		t.Fatalf("app %s/%s: %v, deletion requested %v; want it being deleted", tenant, app, err, obj.DeletionTimestamp)
	}
	base := obj.DeepCopy()
	controllerutil.RemoveFinalizer(obj, platformv1alpha1.AppFinalizer)
	if err := e.Kube.Patch(ctx, obj, client.MergeFrom(base)); err != nil {
		t.Fatalf("removing the finalizer of app %s/%s: %v", tenant, app, err)
	}
}

// LocalFleet is an api.LocalFleet whose readiness the test sets: the
// clusters it lets the API create are objects only, which no controller
// acts on.
type LocalFleet struct {
	mu       sync.Mutex
	notReady error
}

// SetNotReady makes Ready return err; nil makes the fleet ready.
func (f *LocalFleet) SetNotReady(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.notReady = err
}

// Ready returns what SetNotReady set last.
func (f *LocalFleet) Ready() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.notReady
}

var _ api.LocalFleet = (*LocalFleet)(nil)
