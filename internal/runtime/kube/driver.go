package kube

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"bex.co/bex/internal/kubeapply"
	"bex.co/bex/internal/runtime"
	"bex.co/bex/internal/steptime"
)

// DriverLabel is the driver label of the runtime's metrics of apps the
// kube driver runs (runtimemetrics, from ReadInstances).
const DriverLabel = "kube"

var (
	_ runtime.Driver      = (*Driver)(nil)
	_ runtime.ImageRunner = (*Driver)(nil)
)

// Options configures a Driver. Zero fields take the defaults in brackets.
type Options struct {
	// Namespace maps a tenant to its namespace in the cluster [the tenant's
	// name]. The driver creates the namespace when it is missing.
	Namespace func(tenant string) string
	// ProgressDeadline is the Deployments' progressDeadlineSeconds: a
	// rollout that makes no progress for that long fails [10m].
	ProgressDeadline time.Duration
	// RolloutTimeout bounds Deploy's wait for a rollout, in addition to its
	// context [ProgressDeadline + 1m].
	RolloutTimeout time.Duration
	// GracePeriod is how long a process has between SIGTERM and SIGKILL:
	// the pods' terminationGracePeriodSeconds, DrainDelay's too for web
	// pods [30s].
	GracePeriod time.Duration
	// DrainDelay is how long a web pod that is being deleted (a
	// scale-down, a rollout, a removal) keeps serving before its process
	// gets SIGTERM: its container's preStop sleep, in whole seconds. The
	// EndpointSlice controller marks the pod's endpoint terminating as soon
	// as the pod is deleted, and the edge drops it as soon as it sees the
	// slice change; a request routed just before reaches a process that
	// still serves. A negative DrainDelay means none (a cluster whose
	// kubelets predate the sleep action, Kubernetes 1.30) [5s].
	DrainDelay time.Duration
	// StartTimeout is how long a web container may take to pass its
	// first health check before its kubelet restarts it: the startup
	// probe's failureThreshold at one probe a second [60s, the process
	// runtime's].
	StartTimeout time.Duration
	// PollInterval is how often Deploy reads the rollout's progress [1s].
	PollInterval time.Duration
	// PrepareInterval is how long PrepareNamespace trusts its last
	// preparation of a namespace and does nothing [5m]; Deploy prepares
	// every time.
	PrepareInterval time.Duration
	// SummaryMaxAge is how long Usage reuses a node's stats summary it
	// read [2s]: a sampler's round over many apps reads each node about
	// once. A caller that asks for one app again sooner gets the same
	// CPU counters: a sampler's interval must be well above it.
	SummaryMaxAge time.Duration
	// ServicePort is the port of the web Service [80].
	ServicePort int
	// Network is what the NetworkPolicy of each tenant namespace allows
	// [DNS only: nothing reaches the apps, they reach nothing].
	Network TenantNetwork
	// TenantRole, when set, is a ClusterRole that PrepareNamespace binds to
	// TenantSubjects in each tenant namespace (RoleBinding TenantRoleBindingName):
	// rights on that namespace only, for a process that deploys but holds no
	// cluster-wide right to Secrets (the git receiver).
	TenantRole     string
	TenantSubjects []rbacv1.Subject
	// MaxRunDuration bounds a one-off run without a deadline of its own;
	// a run's Pod has its deadline as activeDeadlineSeconds [24h].
	MaxRunDuration time.Duration
	// RunStartTimeout bounds how long a run's Pod may take to start
	// (scheduled, its image pulled) [5m].
	RunStartTimeout time.Duration
	// RunGracePeriod is how long a run's command has to stop once its run
	// ends early, before it is killed [5s].
	RunGracePeriod time.Duration
	// RunLogRetention is how long the Pod of a run whose output goes to
	// its app's log (runtime.Streams.Log: a detached run) is kept once its
	// command has ended, so that Logs shows its lines; SweepRuns (and the
	// app's next run) deletes the Pods kept longer [1h].
	RunLogRetention time.Duration
	// PreparedNamespaces says that another process prepares the tenant
	// namespaces (PrepareNamespace) and this one may not: Deploy then only
	// checks that the namespace enforces the restricted profile and has its
	// NetworkPolicy, and refuses to deploy into one that does not.
	PreparedNamespaces bool
	// NamespaceWait bounds how long a driver with PreparedNamespaces
	// waits for a tenant namespace to be prepared before it refuses to
	// deploy, build or run there: a tenant's first push may come within
	// the second the controller manager takes to prepare the namespace
	// of its first App [30s].
	NamespaceWait time.Duration
}

// TenantNetwork is what apps in a tenant namespace may reach and be reached
// from. Everything else is denied by the namespace's NetworkPolicy
// (TenantPolicyName), including traffic between the namespace's own pods.
type TenantNetwork struct {
	// IngressNamespace is the namespace of the pods that may connect to
	// the apps' web port (the edge's); empty allows none.
	IngressNamespace string
	// IngressPodLabels narrow IngressNamespace to the pods with these
	// labels; empty means every pod of IngressNamespace.
	IngressPodLabels map[string]string
	// IngressCIDRs may also connect to the apps' web port (an edge outside
	// the cluster).
	IngressCIDRs []string
	// EgressCIDRs are where apps may connect to, on any port, besides the
	// cluster's DNS.
	EgressCIDRs []string
	// DNSNamespace is where the cluster's DNS runs: apps may reach it on
	// port 53 [kube-system].
	DNSNamespace string
	// Builds is what build Pods (StartBuild) may reach and be reached
	// from besides the above, in a NetworkPolicy of their own
	// (BuildPolicyName).
	Builds BuildNetwork
}

// BuildNetwork is what a build's Pod may reach and be reached from, beyond
// what TenantNetwork allows every pod of the namespace.
type BuildNetwork struct {
	// IngressNamespace is the namespace of the pods that may connect to
	// the build's agent (the git receiver's); empty allows none.
	IngressNamespace string
	// IngressPodLabels narrow IngressNamespace to the pods with these
	// labels; empty means every pod of IngressNamespace.
	IngressPodLabels map[string]string
	// IngressCIDRs may also connect to the agent (a builder outside the
	// cluster).
	IngressCIDRs []string
	// EgressCIDRs are where builds may connect to, on any port: the
	// package indexes (npm, PyPI, the Go module proxy) and the sources of
	// the apps' dependencies.
	EgressCIDRs []string
	// EgressExceptCIDRs are left out of EgressCIDRs (the cluster's own
	// networks, when EgressCIDRs is 0.0.0.0/0).
	EgressExceptCIDRs []string
}

func (o *Options) complete() {
	if o.Namespace == nil {
		o.Namespace = func(tenant string) string { return tenant }
	}
	if o.ProgressDeadline <= 0 {
		o.ProgressDeadline = 10 * time.Minute
	}
	if o.RolloutTimeout <= 0 {
		o.RolloutTimeout = o.ProgressDeadline + time.Minute
	}
	if o.GracePeriod <= 0 {
		o.GracePeriod = 30 * time.Second
	}
	if o.DrainDelay == 0 {
		o.DrainDelay = 5 * time.Second
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = 60 * time.Second
	}
	if o.PollInterval <= 0 {
		o.PollInterval = time.Second
	}
	if o.PrepareInterval <= 0 {
		o.PrepareInterval = 5 * time.Minute
	}
	if o.SummaryMaxAge <= 0 {
		o.SummaryMaxAge = 2 * time.Second
	}
	if o.MaxRunDuration <= 0 {
		o.MaxRunDuration = 24 * time.Hour
	}
	if o.RunStartTimeout <= 0 {
		o.RunStartTimeout = 5 * time.Minute
	}
	if o.RunGracePeriod <= 0 {
		o.RunGracePeriod = 5 * time.Second
	}
	if o.NamespaceWait <= 0 {
		o.NamespaceWait = 30 * time.Second
	}
	if o.RunLogRetention <= 0 {
		o.RunLogRetention = time.Hour
	}
	if o.ServicePort == 0 {
		o.ServicePort = 80
	}
}

// Driver runs releases as Deployments in a cluster.
type Driver struct {
	c    client.Client
	cs   kubernetes.Interface
	cfg  *rest.Config // for pods/attach's streams
	opts Options

	mu       sync.Mutex
	locks    map[string]*sync.Mutex
	prepared map[string]time.Time // namespace → when it was last prepared

	watchMu sync.Mutex
	watches []*deploymentWatch // watch.go

	summaries summaryCache // usage.go
	streams   streamGate   // streams.go
}

// RunsImage implements runtime.ImageRunner: the cluster pulls every
// release's Image.
func (d *Driver) RunsImage(runtime.Release) bool { return true }

// New returns a Driver for the cluster cfg reaches.
func New(cfg *rest.Config, opts Options) (*Driver, error) {
	if cfg == nil {
		return nil, errors.New("kube driver: rest config is nil")
	}
	scheme := k8sruntime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("creating client: %w", err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating clientset: %w", err)
	}
	opts.complete()
	return &Driver{c: c, cs: cs, cfg: rest.CopyConfig(cfg), opts: opts, locks: map[string]*sync.Mutex{}, prepared: map[string]time.Time{}}, nil
}

// lock serialises the calls of this driver for one app.
func (d *Driver) lock(ns, app string) func() {
	d.mu.Lock()
	l := d.locks[ns+"/"+app]
	if l == nil {
		l = &sync.Mutex{}
		d.locks[ns+"/"+app] = l
	}
	d.mu.Unlock()
	l.Lock()
	return l.Unlock
}

var applyOpts = []client.ApplyOption{client.FieldOwner(kubeapply.FieldManager), client.ForceOwnership}

func appSelector(app string) client.MatchingLabels {
	return client.MatchingLabels{LabelApp: app, LabelManagedBy: managedBy}
}

// Deploy implements runtime.Driver: it applies the release's objects, waits
// until every Deployment has rolled out, and on failure applies the previous
// release's Deployments again (or, for a first release, deletes what it
// created).
func (d *Driver) Deploy(ctx context.Context, rel runtime.Release, log io.Writer) error {
	if log == nil {
		log = io.Discard
	}
	if err := rel.Validate(); err != nil {
		return err
	}
	if rel.Image == "" {
		return errors.New("release has no image")
	}
	ns := d.opts.Namespace(rel.Tenant)
	unlock := d.lock(ns, rel.App)
	defer unlock()

	if _, err := resources(rel.Resources); err != nil {
		return err
	}
	stopNamespace := steptime.Start(ctx, "namespace")
	var err error
	if d.opts.PreparedNamespaces {
		err = d.waitNamespace(ctx, ns, log)
	} else {
		err = d.prepareNamespace(ctx, ns, rel.Tenant)
	}
	stopNamespace()
	if err != nil {
		return err
	}

	// What runs now, to go back to if this release fails.
	stopApply := steptime.Start(ctx, "apply")
	var current appsv1.DeploymentList
	if err := d.c.List(ctx, &current, client.InNamespace(ns), appSelector(rel.App)); err != nil {
		return fmt.Errorf("listing deployments: %w", err)
	}
	previous := map[string]*appsv1ac.DeploymentApplyConfiguration{}
	for i := range current.Items {
		ac, err := appsv1ac.ExtractDeployment(&current.Items[i], kubeapply.FieldManager)
		if err != nil {
			return fmt.Errorf("reading deployment %s: %w", current.Items[i].Name, err)
		}
		previous[current.Items[i].Labels[LabelProcess]] = ac
	}
	deployments := map[string]*appsv1ac.DeploymentApplyConfiguration{}
	for _, p := range rel.ProcessNames() {
		dep, err := d.deployment(ns, keepRestart(rel, p, previous[p]), p)
		if err != nil {
			return err
		}
		deployments[p] = dep
	}

	// The lines of the Pods this release replaces outlive them.
	var keeper *lineKeeper
	if before, err := d.instancePods(ctx, ns, rel.App); err == nil {
		keeper = d.keepLines(ctx, ns, rel.App, before, d.opts.RolloutTimeout+d.opts.GracePeriod+max(d.opts.DrainDelay, 0)+10*time.Second)
	}
	drop := func(err error) error {
		if keeper != nil {
			keeper.drop()
		}
		return err
	}

	// The release's own Secret: the pods of the release before it keep
	// theirs until this one has rolled out.
	if err := d.c.Apply(ctx, envSecret(ns, rel), applyOpts...); err != nil {
		return drop(d.rollBack(ctx, ns, rel, previous, log, fmt.Errorf("applying secret %s: %w", EnvSecretName(rel.App, rel.Number), err)))
	}
	for _, p := range rel.ProcessNames() {
		fmt.Fprintf(log, "Applying deployment %s/%s: release %d, %d × %s\n", ns, ObjectName(rel.App, p), rel.Number, rel.Processes[p].Replicas, rel.Image)
		if err := d.c.Apply(ctx, deployments[p], applyOpts...); err != nil {
			return drop(d.rollBack(ctx, ns, rel, previous, log, fmt.Errorf("applying deployment %s: %w", ObjectName(rel.App, p), err)))
		}
	}
	if err := d.applyServiceAndPDBs(ctx, ns, rel); err != nil {
		return drop(d.rollBack(ctx, ns, rel, previous, log, err))
	}
	stopApply()

	stopRollout := steptime.Start(ctx, "rollout")
	err = d.waitRollout(ctx, ns, rel, log)
	stopRollout()
	if err != nil {
		return drop(d.rollBack(ctx, ns, rel, previous, log, err))
	}

	stopPrune := steptime.Start(ctx, "prune")
	err = d.pruneAfterRollout(ctx, ns, rel, previous, log)
	stopPrune()
	if keeper != nil {
		keeper.keep(ctx)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(log, "Release %d is live\n", rel.Number)
	return nil
}

// keepRestart returns rel with the Restart of process set, when rel
// leaves it empty, to the one its Deployment prev already runs for the
// same release: an empty Restart asks for no restart, so the pods stay.
func keepRestart(rel runtime.Release, process string, prev *appsv1ac.DeploymentApplyConfiguration) runtime.Release {
	p := rel.Processes[process]
	if p.Restart != "" || prev == nil || prev.Spec == nil || prev.Spec.Template == nil ||
		prev.Spec.Template.Labels[LabelRelease] != strconv.Itoa(rel.Number) {
		return rel
	}
	if token := prev.Spec.Template.Annotations[AnnotationRestart]; token != "" {
		procs := maps.Clone(rel.Processes)
		p.Restart = token
		procs[process] = p
		rel.Processes = procs
	}
	return rel
}

// PrepareNamespace makes the tenant's namespace what apps run in: created
// when missing, labelled for Pod Security admission to enforce the
// restricted profile, with the NetworkPolicy of Options.Network and the
// RoleBinding of Options.TenantRole. It is level-based (labels or a policy
// changed by hand are put back) but does nothing when this driver prepared
// the namespace less than Options.PrepareInterval ago; Deploy prepares
// every time.
func (d *Driver) PrepareNamespace(ctx context.Context, tenant string) error {
	ns := d.opts.Namespace(tenant)
	d.mu.Lock()
	last, ok := d.prepared[ns]
	d.mu.Unlock()
	if ok && time.Since(last) < d.opts.PrepareInterval {
		return nil
	}
	return d.prepareNamespace(ctx, ns, tenant)
}

func (d *Driver) prepareNamespace(ctx context.Context, ns, tenant string) error {
	d.mu.Lock()
	delete(d.prepared, ns)
	d.mu.Unlock()
	if err := d.c.Apply(ctx, tenantNamespace(ns, tenant), applyOpts...); err != nil {
		return fmt.Errorf("applying namespace %s: %w", ns, err)
	}
	if err := d.c.Apply(ctx, tenantPolicy(ns, tenant, d.opts.Network), applyOpts...); err != nil {
		return fmt.Errorf("applying network policy %s/%s: %w", ns, TenantPolicyName, err)
	}
	if err := d.c.Apply(ctx, buildPolicy(ns, tenant, d.opts.Network.Builds), applyOpts...); err != nil {
		return fmt.Errorf("applying network policy %s/%s: %w", ns, BuildPolicyName, err)
	}
	if d.opts.TenantRole != "" {
		if err := d.c.Apply(ctx, TenantRoleBinding(TenantRoleBindingName, ns, tenant, d.opts.TenantRole, d.opts.TenantSubjects), applyOpts...); err != nil {
			return fmt.Errorf("applying role binding %s/%s: %w", ns, TenantRoleBindingName, err)
		}
	}
	d.mu.Lock()
	d.prepared[ns] = time.Now()
	d.mu.Unlock()
	return nil
}

// waitNamespace waits, at most Options.NamespaceWait, until ns was
// prepared (checkNamespace), saying so once on log (nil: not said), and
// returns checkNamespace's error when it was not.
func (d *Driver) waitNamespace(ctx context.Context, ns string, log io.Writer) error {
	until := time.Now().Add(d.opts.NamespaceWait)
	said := false
	for {
		err := d.checkNamespace(ctx, ns)
		var np *notPreparedError
		if !errors.As(err, &np) || !time.Now().Before(until) {
			return err
		}
		if !said && log != nil {
			fmt.Fprintf(log, "waiting for namespace %s to be prepared for apps (%s)\n", ns, np.what)
			said = true
		}
		if d.sleep(ctx) != nil {
			return err
		}
	}
}

// notPreparedError is checkNamespace's answer for a namespace nobody
// prepared (yet).
type notPreparedError struct{ ns, what string }

func (e *notPreparedError) Error() string {
	return fmt.Sprintf("namespace %s is not ready for apps (%s); the controller manager and bex-web prepare tenant namespaces: create the app again, or ask the operator to restart the controller manager", e.ns, e.what)
}

// checkNamespace returns an error unless ns was prepared: it enforces the
// restricted profile and has the tenant NetworkPolicy.
func (d *Driver) checkNamespace(ctx context.Context, ns string) error {
	notPrepared := func(what string) error { return &notPreparedError{ns, what} }
	var n corev1.Namespace
	if err := d.c.Get(ctx, client.ObjectKey{Name: ns}, &n); apierrors.IsNotFound(err) {
		return notPrepared("it does not exist")
	} else if err != nil {
		return fmt.Errorf("reading namespace %s: %w", ns, err)
	}
	if n.Labels[labelPSAEnforce] != psaRestricted {
		return notPrepared(labelPSAEnforce + " is not " + psaRestricted)
	}
	var np networkingv1.NetworkPolicy
	if err := d.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: TenantPolicyName}, &np); apierrors.IsNotFound(err) {
		return notPrepared("no NetworkPolicy " + TenantPolicyName)
	} else if err != nil {
		return fmt.Errorf("reading network policy %s/%s: %w", ns, TenantPolicyName, err)
	}
	return nil
}

// applyServiceAndPDBs applies the web Service and the PDBs of processes with
// more than one replica. What the release no longer needs goes only once it
// has rolled out (pruneAfterRollout), so that a failed release leaves the
// previous one as it was.
func (d *Driver) applyServiceAndPDBs(ctx context.Context, ns string, rel runtime.Release) error {
	if _, ok := rel.Processes[runtime.WebProcess]; ok {
		if err := d.c.Apply(ctx, d.service(ns, rel), applyOpts...); err != nil {
			return fmt.Errorf("applying service %s: %w", rel.App, err)
		}
	}
	for _, p := range rel.ProcessNames() {
		if rel.Processes[p].Replicas > 1 {
			if err := d.c.Apply(ctx, pdb(ns, rel, p), applyOpts...); err != nil {
				return fmt.Errorf("applying pod disruption budget %s: %w", ObjectName(rel.App, p), err)
			}
		}
	}
	return nil
}

// pruneAfterRollout deletes what the rolled-out release no longer has: the
// Deployments of dropped processes, the Service without a web process, and
// the PDBs of processes with at most one replica.
func (d *Driver) pruneAfterRollout(ctx context.Context, ns string, rel runtime.Release, previous map[string]*appsv1ac.DeploymentApplyConfiguration, log io.Writer) error {
	for p := range previous {
		if _, ok := rel.Processes[p]; ok {
			continue
		}
		fmt.Fprintf(log, "Deleting deployment %s/%s: release %d has no %s process\n", ns, ObjectName(rel.App, p), rel.Number, p)
		if err := d.deleteProcess(ctx, ns, rel.App, p); err != nil {
			return err
		}
	}
	if _, ok := rel.Processes[runtime.WebProcess]; !ok {
		if err := d.deleteIgnoringNotFound(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: rel.App}}); err != nil {
			return err
		}
	}
	for _, p := range rel.ProcessNames() {
		if rel.Processes[p].Replicas <= 1 {
			if err := d.deleteIgnoringNotFound(ctx, &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: ObjectName(rel.App, p)}}); err != nil {
				return err
			}
		}
	}
	// No pod of an earlier release is left to read its Secret.
	return d.deleteEnvSecrets(ctx, ns, rel.App, func(release string) bool { return release != strconv.Itoa(rel.Number) })
}

// deleteEnvSecrets deletes the app's environment Secrets of the releases
// match selects.
func (d *Driver) deleteEnvSecrets(ctx context.Context, ns, app string, match func(release string) bool) error {
	var secrets corev1.SecretList
	if err := d.c.List(ctx, &secrets, client.InNamespace(ns), appSelector(app)); err != nil {
		return fmt.Errorf("listing secrets: %w", err)
	}
	for i := range secrets.Items {
		if match(secrets.Items[i].Labels[LabelRelease]) {
			if err := d.deleteIgnoringNotFound(ctx, &secrets.Items[i]); err != nil {
				return err
			}
		}
	}
	return nil
}

func (d *Driver) deleteIgnoringNotFound(ctx context.Context, obj client.Object) error {
	err := d.c.Delete(ctx, obj, client.PropagationPolicy(metav1.DeletePropagationBackground))
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting %T %s: %w", obj, obj.GetName(), err)
	}
	return nil
}

func (d *Driver) deleteProcess(ctx context.Context, ns, app, process string) error {
	name := ObjectName(app, process)
	if err := d.deleteIgnoringNotFound(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}); err != nil {
		return err
	}
	return d.deleteIgnoringNotFound(ctx, &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})
}

// rollBack restores the previous release after cause made this one fail,
// and returns the error Deploy reports.
func (d *Driver) rollBack(ctx context.Context, ns string, rel runtime.Release, previous map[string]*appsv1ac.DeploymentApplyConfiguration, log io.Writer, cause error) error {
	fmt.Fprintf(log, "Release %d failed: %v\n", rel.Number, cause)
	// Restore even when ctx has ended: leaving a half-rolled release is worse.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	var errs []error
	prevRelease := ""
	for _, p := range rel.ProcessNames() {
		prev, ok := previous[p]
		if !ok {
			if err := d.deleteProcess(ctx, ns, rel.App, p); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		if prev.Labels != nil {
			prevRelease = prev.Labels[LabelRelease]
		}
		if err := d.c.Apply(ctx, prev, applyOpts...); err != nil {
			errs = append(errs, fmt.Errorf("restoring deployment %s: %w", ObjectName(rel.App, p), err))
		}
		// This release may have added a PDB the previous one did not need.
		if prev.Spec == nil || prev.Spec.Replicas == nil || *prev.Spec.Replicas <= 1 {
			if err := d.deleteIgnoringNotFound(ctx, &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: ObjectName(rel.App, p)}}); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if len(previous) == 0 {
		if err := d.deleteIgnoringNotFound(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: rel.App}}); err != nil {
			errs = append(errs, err)
		}
	}
	// The failed release's Secret, unless what runs is that same release
	// (rolled out again).
	if prevRelease != strconv.Itoa(rel.Number) {
		if err := d.deleteIgnoringNotFound(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: EnvSecretName(rel.App, rel.Number)}}); err != nil {
			errs = append(errs, err)
		}
	}
	if len(previous) > 0 && prevRelease != "" {
		fmt.Fprintf(log, "Release %s keeps serving\n", prevRelease)
	}
	err := fmt.Errorf("release %d not deployed: %w", rel.Number, cause)
	if len(errs) > 0 {
		err = fmt.Errorf("%w; restoring the previous release: %w", err, errors.Join(errs...))
	}
	return err
}

// waitRollout waits until every Deployment of rel has rolled out, or one
// fails, or the deadline passes.
func (d *Driver) waitRollout(ctx context.Context, ns string, rel runtime.Release, log io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, d.opts.RolloutTimeout)
	defer cancel()
	changes := d.deploymentChanges(ctx, ns, rel.App)
	last := map[string]string{}
	// notRolledOut is the error once the deadline passed, pending saying
	// where a process stood.
	notRolledOut := func(pending string) error {
		return fmt.Errorf("not rolled out before the deadline (%s): %w", pending, context.Cause(ctx))
	}
	for {
		pending := ""
		for _, p := range rel.ProcessNames() {
			var dep appsv1.Deployment
			if err := d.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: ObjectName(rel.App, p)}, &dep); err != nil {
				if ctx.Err() != nil {
					break
				}
				if throttledPastDeadline(err) {
					// The deadline passes before the client may ask again:
					// the rollout did not make it, as below.
					<-ctx.Done()
					if pending == "" && last[p] != "" {
						pending = p + ": " + last[p]
					}
					return notRolledOut(pending)
				}
				return fmt.Errorf("reading deployment %s: %w", ObjectName(rel.App, p), err)
			}
			r := rollout(&dep)
			if r.failed != "" {
				why := d.whyNotReady(ctx, ns, rel.App, p, rel.Number)
				return fmt.Errorf("%s %s%s", p, r.failed, why)
			}
			if !r.done {
				if last[p] != r.progress {
					fmt.Fprintf(log, "Waiting for %s: %s\n", p, r.progress)
					last[p] = r.progress
				}
				if pending == "" {
					pending = p + ": " + r.progress
				}
			}
		}
		if pending == "" && ctx.Err() == nil {
			return nil
		}
		t := time.NewTimer(d.opts.PollInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return notRolledOut(pending)
		case <-t.C:
		case <-changes:
			t.Stop()
		}
	}
}

// deploymentChanges watches the Deployments of app in ns until ctx ends:
// the channel receives when one changed, its status included, so that a
// rollout is seen done as soon as its Deployment says so rather than at
// the next poll. Without a watch (refused, or ended) the channel never
// receives and waitRollout polls alone.
func (d *Driver) deploymentChanges(ctx context.Context, ns, app string) <-chan struct{} {
	changes := make(chan struct{}, 1)
	w, err := d.cs.AppsV1().Deployments(ns).Watch(ctx, metav1.ListOptions{
		LabelSelector: LabelApp + "=" + app + "," + LabelManagedBy + "=" + managedBy,
	})
	if err != nil {
		return changes
	}
	go func() {
		defer w.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case _, ok := <-w.ResultChan():
				if !ok {
					return
				}
				select {
				case changes <- struct{}{}:
				default:
				}
			}
		}
	}()
	return changes
}

// throttledPastDeadline reports whether err is client-go's rate limiter
// refusing a request because its turn would come after the context's
// deadline ("client rate limiter Wait returned an error: rate: Wait(n=1)
// would exceed context deadline"): golang.org/x/time/rate gives that
// refusal no error value of its own, so it is known by its words. A
// request refused so is a deadline reached early, not a fault.
func throttledPastDeadline(err error) bool {
	return strings.Contains(err.Error(), "would exceed context deadline")
}

// rolloutState is where a Deployment's rollout stands, as kubectl rollout
// status reads it.
type rolloutState struct {
	done     bool
	failed   string
	progress string
}

// replicasOf is how many instances dep wants: its replicas, 1 when unset
// (the Deployment default).
func replicasOf(dep *appsv1.Deployment) int32 {
	if dep.Spec.Replicas != nil {
		return *dep.Spec.Replicas
	}
	return 1
}

func rollout(dep *appsv1.Deployment) rolloutState {
	want := replicasOf(dep)
	st := dep.Status
	if dep.Generation > st.ObservedGeneration {
		return rolloutState{progress: "waiting for the new spec to be observed"}
	}
	for _, c := range st.Conditions {
		if c.Type == appsv1.DeploymentProgressing && c.Reason == "ProgressDeadlineExceeded" {
			return rolloutState{failed: fmt.Sprintf("did not become ready in time (%d of %d new instances available): %s", min(st.AvailableReplicas, st.UpdatedReplicas), want, c.Message)}
		}
	}
	switch {
	case st.UpdatedReplicas < want:
		return rolloutState{progress: fmt.Sprintf("%d of %d new instances started", st.UpdatedReplicas, want)}
	case st.Replicas > st.UpdatedReplicas:
		return rolloutState{progress: fmt.Sprintf("%d old instances stopping", st.Replicas-st.UpdatedReplicas)}
	case st.AvailableReplicas < st.UpdatedReplicas:
		return rolloutState{progress: fmt.Sprintf("%d of %d new instances available", st.AvailableReplicas, st.UpdatedReplicas)}
	}
	return rolloutState{done: true, progress: fmt.Sprintf("%d of %d instances available", st.AvailableReplicas, want)}
}

// whyNotReady looks at the pods of a process's release for the reason it
// is not ready: a container waiting (CrashLoopBackOff, ErrImagePull) or the
// last failed readiness probe. It returns "" when it finds nothing.
func (d *Driver) whyNotReady(ctx context.Context, ns, app, process string, release int) string {
	var pods corev1.PodList
	if err := d.c.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{LabelApp: app, LabelProcess: process, LabelRelease: strconv.Itoa(release)}); err != nil {
		return ""
	}
	for _, pod := range pods.Items {
		if podReady(&pod) {
			continue
		}
		for _, cs := range pod.Status.ContainerStatuses {
			if w := cs.State.Waiting; w != nil && w.Reason != "" && w.Reason != "ContainerCreating" {
				return fmt.Sprintf("; pod %s: %s %s", pod.Name, w.Reason, w.Message)
			}
		}
		var events corev1.EventList
		if err := d.c.List(ctx, &events, client.InNamespace(ns), client.MatchingFields{"involvedObject.name": pod.Name}); err == nil {
			sort.Slice(events.Items, func(i, j int) bool { return eventTime(&events.Items[i]).After(eventTime(&events.Items[j])) })
			for _, e := range events.Items {
				if e.Reason == "Unhealthy" || e.Reason == "Failed" || e.Reason == "FailedScheduling" || e.Reason == "BackOff" {
					return fmt.Sprintf("; pod %s: %s", pod.Name, e.Message)
				}
			}
		}
	}
	return ""
}

func eventTime(e *corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// Remove implements runtime.Driver: it deletes the app's Deployments,
// Service, PodDisruptionBudgets and environment Secrets (the pods go with
// the Deployments), and the Pods and Secrets of its one-off runs and builds, which
// ends those still running.
func (d *Driver) Remove(ctx context.Context, tenant, app string) error {
	ns := d.opts.Namespace(tenant)
	unlock := d.lock(ns, app)
	defer unlock()
	var deps appsv1.DeploymentList
	if err := d.c.List(ctx, &deps, client.InNamespace(ns), appSelector(app)); err != nil {
		return fmt.Errorf("listing deployments: %w", err)
	}
	var pdbs policyv1.PodDisruptionBudgetList
	if err := d.c.List(ctx, &pdbs, client.InNamespace(ns), appSelector(app)); err != nil {
		return fmt.Errorf("listing pod disruption budgets: %w", err)
	}
	var svcs corev1.ServiceList
	if err := d.c.List(ctx, &svcs, client.InNamespace(ns), appSelector(app)); err != nil {
		return fmt.Errorf("listing services: %w", err)
	}
	var objs []client.Object
	for i := range deps.Items {
		objs = append(objs, &deps.Items[i])
	}
	for i := range pdbs.Items {
		objs = append(objs, &pdbs.Items[i])
	}
	for i := range svcs.Items {
		objs = append(objs, &svcs.Items[i])
	}
	// Runs and builds: their Pods and Secrets.
	for _, sel := range []client.MatchingLabels{runSelector(app), buildSelector(app)} {
		var pods corev1.PodList
		if err := d.c.List(ctx, &pods, client.InNamespace(ns), sel); err != nil {
			return fmt.Errorf("listing pods: %w", err)
		}
		var secrets corev1.SecretList
		if err := d.c.List(ctx, &secrets, client.InNamespace(ns), sel); err != nil {
			return fmt.Errorf("listing secrets: %w", err)
		}
		for i := range pods.Items {
			objs = append(objs, &pods.Items[i])
		}
		for i := range secrets.Items {
			objs = append(objs, &secrets.Items[i])
		}
	}
	for _, o := range objs {
		if err := d.deleteIgnoringNotFound(ctx, o); err != nil {
			return err
		}
	}
	if err := d.deleteKeptLines(ctx, ns, app); err != nil {
		return err
	}
	return d.deleteEnvSecrets(ctx, ns, app, func(string) bool { return true })
}

// Status implements runtime.Driver, from the app's Deployments and Pods.
func (d *Driver) Status(ctx context.Context, tenant, app string) (runtime.Status, error) {
	ns := d.opts.Namespace(tenant)
	var deps appsv1.DeploymentList
	if err := d.c.List(ctx, &deps, client.InNamespace(ns), appSelector(app)); err != nil {
		return runtime.Status{}, fmt.Errorf("listing deployments: %w", err)
	}
	if len(deps.Items) == 0 {
		return runtime.Status{}, fmt.Errorf("%s/%s: %w", tenant, app, runtime.ErrNotFound)
	}
	var pods corev1.PodList
	if err := d.c.List(ctx, &pods, client.InNamespace(ns), appSelector(app)); err != nil {
		return runtime.Status{}, fmt.Errorf("listing pods: %w", err)
	}
	st := statusFrom(deps.Items)
	st.Instances = instancesFrom(pods.Items)
	return st, nil
}

// statusFrom computes Release, Ready and Message from the Deployments. A
// ready app's Message is the process driver's ("release 4: 2 of 2
// instances running"), so that bex ps reads the same on every runtime.
func statusFrom(deps []appsv1.Deployment) runtime.Status {
	sort.Slice(deps, func(i, j int) bool { return deps[i].Name < deps[j].Name })
	var st runtime.Status
	var notReady []string
	var running, want int32
	for i := range deps {
		dep := &deps[i]
		process := dep.Labels[LabelProcess]
		if n, err := strconv.Atoi(dep.Spec.Template.Labels[LabelRelease]); err == nil && n > st.Release {
			st.Release = n
		}
		r := rollout(dep)
		switch {
		case r.failed != "":
			notReady = append(notReady, process+" "+r.failed)
		case !r.done:
			notReady = append(notReady, process+": "+r.progress)
		default:
			if msg := unavailable(dep); msg != "" {
				notReady = append(notReady, process+": "+msg)
			} else {
				running += dep.Status.AvailableReplicas
				want += replicasOf(dep)
			}
		}
	}
	st.Ready = len(notReady) == 0
	if st.Ready {
		st.Message = fmt.Sprintf("release %d: %d of %d instances running", st.Release, running, want)
	} else {
		st.Message = fmt.Sprintf("release %d: %s", st.Release, strings.Join(notReady, "; "))
	}
	return st
}

// unavailable returns the message of a False Available condition.
func unavailable(dep *appsv1.Deployment) string {
	for _, c := range dep.Status.Conditions {
		if c.Type == appsv1.DeploymentAvailable && c.Status == corev1.ConditionFalse {
			return c.Message
		}
	}
	return ""
}

// instancesFrom maps pods to instances: indexes count the pods of a process
// and release in order of creation.
func instancesFrom(pods []corev1.Pod) []runtime.Instance {
	sort.Slice(pods, func(i, j int) bool {
		a, b := &pods[i], &pods[j]
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.CreationTimestamp.Before(&b.CreationTimestamp)
		}
		return a.Name < b.Name
	})
	next := map[string]int{}
	var out []runtime.Instance
	for i := range pods {
		pod := &pods[i]
		process := pod.Labels[LabelProcess]
		release, _ := strconv.Atoi(pod.Labels[LabelRelease])
		key := process + "/" + strconv.Itoa(release)
		inst := runtime.Instance{Process: process, Index: next[key], ID: pod.Name, Release: release, Since: pod.CreationTimestamp.Time}
		next[key]++
		inst.State, inst.Since = podState(pod)
		for _, cs := range pod.Status.ContainerStatuses {
			inst.Restarts += int(cs.RestartCount)
		}
		out = append(out, inst)
	}
	return out
}

// podState is the state of pod's instance and since when it is in it.
func podState(pod *corev1.Pod) (runtime.InstanceState, time.Time) {
	since := pod.CreationTimestamp.Time
	if pod.DeletionTimestamp != nil {
		return runtime.Stopped, pod.DeletionTimestamp.Time
	}
	switch pod.Status.Phase {
	case corev1.PodFailed:
		return runtime.Crashed, since
	case corev1.PodSucceeded:
		return runtime.Stopped, since
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil && (w.Reason == "CrashLoopBackOff" || cs.LastTerminationState.Terminated != nil) {
			if t := cs.LastTerminationState.Terminated; t != nil {
				since = t.FinishedAt.Time
			}
			return runtime.Crashed, since
		}
	}
	for _, c := range pod.Status.Conditions {
		if c.Type != corev1.PodReady {
			continue
		}
		if c.Status == corev1.ConditionTrue {
			return runtime.Running, runningSince(pod, c.LastTransitionTime.Time)
		}
		if runningLong(pod) {
			return runtime.Unhealthy, c.LastTransitionTime.Time
		}
	}
	return runtime.Starting, since
}

// runningSince is when a ready pod's instance came up: when it became
// ready, or when its container last started if that is later (a container
// that crashed and restarted within one status update leaves the Ready
// condition's transition where it was).
func runningSince(pod *corev1.Pod, ready time.Time) time.Time {
	since := ready
	for _, cs := range pod.Status.ContainerStatuses {
		if r := cs.State.Running; r != nil && r.StartedAt.After(since) {
			since = r.StartedAt.Time
		}
	}
	return since
}

// runningLong reports whether a container of the pod has been running for
// over a minute without being ready: past any start-up, its readiness probe
// fails. (The pod does not say whether it was ready before.)
func runningLong(pod *corev1.Pod) bool {
	for _, cs := range pod.Status.ContainerStatuses {
		if r := cs.State.Running; r != nil && !cs.Ready && r.StartedAt.Add(time.Minute).Before(time.Now()) {
			return true
		}
	}
	return false
}
