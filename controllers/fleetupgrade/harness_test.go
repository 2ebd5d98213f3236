package fleetupgrade_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	fleetv1 "bex.co/bex/apis/fleet/v1alpha1"
	"bex.co/bex/controllers"
	"bex.co/bex/controllers/fleetupgrade"
	capicrds "bex.co/bex/deploy/capi-crds"
	"bex.co/bex/internal/controlplane/cptest"
	"bex.co/bex/internal/hetzner/hcloudfake"
	"bex.co/bex/internal/kubeapply"
	"bex.co/bex/internal/store"
	"bex.co/bex/internal/upgrade/verify"
	"bex.co/bex/test/platformtest"
)

// env is a real apiserver with the fleet and Cluster API CRDs, the
// FleetUpgrade controller running in a manager, a verifier that passes
// every round and in-memory records.
type env struct {
	t        *testing.T
	ctx      context.Context
	c        client.Client
	verifier *fakeVerifier
	records  *fakeRecords
	// secretLists records the manager's lists and watches of Secrets
	// with their data.
	secretLists *platformtest.SecretLists
}

// waitTimeout bounds an env's life, and each wait in it.
const waitTimeout = 4 * time.Minute

// startEnv starts the env; configure (if any) changes the reconciler
// before it is set up.
func startEnv(t *testing.T, configure ...func(*fleetupgrade.Reconciler)) *env {
	t.Helper()
	ctrl.SetLogger(logr.Discard())
	cp := cptest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	t.Cleanup(cancel)
	if _, err := kubeapply.InstallCRDs(ctx, cp.RESTConfig(), capicrds.CRDs()); err != nil {
		t.Fatalf("installing Cluster API CRDs: %v", err)
	}
	secretLists := &platformtest.SecretLists{}
	cfg := rest.CopyConfig(cp.RESTConfig())
	cfg.Wrap(secretLists.Wrap)
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 controllers.NewScheme(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		// Each test runs its own manager in one process.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, ctx: ctx, verifier: &fakeVerifier{}, records: &fakeRecords{}, secretLists: secretLists}
	r := &fleetupgrade.Reconciler{
		Client:   mgr.GetClient(),
		Verifier: e.verifier,
		Records:  e.records,
		Events:   mgr.GetEventRecorder(fleetupgrade.ControllerName),
		Options:  fleetupgrade.Options{PollInterval: time.Second, VerifyRetryInterval: 500 * time.Millisecond},
	}
	for _, c := range configure {
		c(r)
	}
	if err := r.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	mgrCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = mgr.Start(mgrCtx) }()
	t.Cleanup(func() { stop(); <-done })
	scheme := controllers.NewScheme()
	if err := eventsv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if e.c, err = client.New(cp.RESTConfig(), client.Options{Scheme: scheme}); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *env) get(obj client.Object, ns, name string) {
	e.t.Helper()
	if err := e.c.Get(e.ctx, client.ObjectKey{Namespace: ns, Name: name}, obj); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) upgrade(name string) *fleetv1.FleetUpgrade {
	e.t.Helper()
	fu := &fleetv1.FleetUpgrade{}
	e.get(fu, "", name)
	return fu
}

// waitCondition waits until the FleetUpgrade's condition has status and
// reason, and returns the FleetUpgrade.
func (e *env) waitCondition(name, typ string, status metav1.ConditionStatus, reason string) *fleetv1.FleetUpgrade {
	e.t.Helper()
	var fu *fleetv1.FleetUpgrade
	platformtest.Eventually(e.t, waitTimeout, fmt.Sprintf("%s %s=%s/%s", name, typ, status, reason), func(context.Context) error {
		fu = e.upgrade(name)
		if err := platformtest.HasCondition(fu.Status.Conditions, typ, status, reason); err != nil {
			return fmt.Errorf("phase %s, %w", fu.Status.Phase, err)
		}
		return nil
	})
	return fu
}

func (e *env) waitPhase(name string, phase fleetv1.FleetUpgradePhase) *fleetv1.FleetUpgrade {
	e.t.Helper()
	var fu *fleetv1.FleetUpgrade
	platformtest.Eventually(e.t, waitTimeout, fmt.Sprintf("%s phase %s", name, phase), func(context.Context) error {
		fu = e.upgrade(name)
		if fu.Status.Phase != phase {
			return fmt.Errorf("phase %s, conditions %+v", fu.Status.Phase, fu.Status.Conditions)
		}
		return nil
	})
	return fu
}

// fixture is one workload cluster: a Cluster, its KubeadmControlPlane
// (three replicas, maxSurge 0), its kubeconfig Secret and three Machines.
// With hcloud, each Machine has a server of its name in the fake Hetzner
// API; with loadBalancer too, the three first servers are the targets of
// a load balancer of that name, which the Cluster's
// fleetupgrade.LoadBalancerAnnotation names.
type fixture struct {
	ns, name, version string
	labels            map[string]string
	extraArgs         []bootstrapv1.Arg
	hcloud            *hcloudfake.Fake
	loadBalancer      string
}

// wired are the extraArgs of a 1.36+ control plane with MVP wired.
var wired = []bootstrapv1.Arg{{Name: "peer-ca-file", Value: ptr.To("/etc/kubernetes/pki/ca.crt")}}

func (e *env) createCluster(f fixture) *kcpSim {
	e.t.Helper()
	ctx := e.ctx
	if err := e.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		e.t.Fatal(err)
	}
	var annotations map[string]string
	if f.loadBalancer != "" {
		annotations = map[string]string{fleetupgrade.LoadBalancerAnnotation: f.loadBalancer}
	}
	cluster := &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: f.name, Labels: f.labels, Annotations: annotations},
		Spec: clusterv1.ClusterSpec{
			ControlPlaneRef:      clusterv1.ContractVersionedObjectReference{APIGroup: controlplanev1.GroupVersion.Group, Kind: "KubeadmControlPlane", Name: f.name},
			ControlPlaneEndpoint: clusterv1.APIEndpoint{Host: "lb." + f.name + ".example", Port: 6443},
		},
	}
	kcp := &controlplanev1.KubeadmControlPlane{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: f.name},
		Spec: controlplanev1.KubeadmControlPlaneSpec{
			Replicas: ptr.To[int32](3),
			Version:  f.version,
			MachineTemplate: controlplanev1.KubeadmControlPlaneMachineTemplate{Spec: controlplanev1.KubeadmControlPlaneMachineTemplateSpec{
				InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "HCloudMachineTemplate", Name: f.name},
			}},
			KubeadmConfigSpec: bootstrapv1.KubeadmConfigSpec{ClusterConfiguration: bootstrapv1.ClusterConfiguration{
				APIServer: bootstrapv1.APIServer{ExtraArgs: f.extraArgs},
			}},
			Rollout: controlplanev1.KubeadmControlPlaneRolloutSpec{Strategy: controlplanev1.KubeadmControlPlaneRolloutStrategy{
				Type:          controlplanev1.RollingUpdateStrategyType,
				RollingUpdate: controlplanev1.KubeadmControlPlaneRolloutStrategyRollingUpdate{MaxSurge: ptr.To(intstr.FromInt32(0))},
			}},
		},
	}
	kubeconfig, err := clientcmd.Write(clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{f.name: {Server: "https://lb." + f.name + ".example:6443", CertificateAuthorityData: []byte("not a real CA")}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{"admin": {Token: "admin-token"}},
		Contexts:       map[string]*clientcmdapi.Context{f.name: {Cluster: f.name, AuthInfo: "admin"}},
		CurrentContext: f.name,
	})
	if err != nil {
		e.t.Fatal(err)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: f.name + "-kubeconfig"}, Data: map[string][]byte{"value": kubeconfig}}
	for _, obj := range []client.Object{cluster, kcp, secret} {
		if err := e.c.Create(ctx, obj); err != nil {
			e.t.Fatalf("creating %T: %v", obj, err)
		}
	}
	sim := &kcpSim{c: e.c, ns: f.ns, name: f.name, settle: 2 * time.Second, joinAfter: 300 * time.Millisecond, hcloud: f.hcloud}
	if f.hcloud != nil {
		sim.hclient = f.hcloud.Client()
	}
	sim.seed(ctx, e.t)
	if f.loadBalancer != "" {
		sim.loadBalancer = f.hcloud.AddLoadBalancer(hcloudfake.LoadBalancerSpec{Name: f.loadBalancer, Location: "fsn1", ListenPorts: []int{6443},
			Targets: []int64{sim.serverID("cp-1"), sim.serverID("cp-2"), sim.serverID("cp-3")}})
	}
	return sim
}

// kcpSim behaves like KubeadmControlPlane with maxSurge 0 for one control
// plane: while the Cluster is not paused and a Machine is outdated (another
// version, or extraArgs it was not created with), it deletes the oldest
// outdated Machine, waits until it is gone, then creates its replacement,
// which joins (apiserver healthy, an address) after joinAfter; it waits
// settle after a join before it deletes the next machine, as KCP waits for
// etcd and the control-plane components to be healthy. It keeps the KCP's
// status.
//
// It also plays Cluster API's machine controller (and CAPH's server
// handling): a Machine carries the finalizer clusterv1.MachineFinalizer
// from its creation; once it is being deleted and no pre-drain or
// pre-terminate deletion hook annotation is left on it, the sim deletes its
// server through the (fake) Hetzner API, when there is one, and removes the
// finalizer. A Machine's server is created in the fake with the Machine.
type kcpSim struct {
	c                 client.Client
	ns, name          string
	settle, joinAfter time.Duration
	hcloud            *hcloudfake.Fake
	hclient           *hcloud.Client
	loadBalancer      int64

	mu         sync.Mutex
	next       int
	lastJoined time.Time
	deleted    []string
	servers    map[string]int64
}

const configAnnotation = "sim.test/config"

func configOf(kcp *controlplanev1.KubeadmControlPlane) string {
	var parts []string
	for _, a := range kcp.Spec.KubeadmConfigSpec.ClusterConfiguration.APIServer.ExtraArgs {
		parts = append(parts, a.Name+"="+ptr.Deref(a.Value, ""))
	}
	return strings.Join(parts, ",")
}

func (s *kcpSim) seed(ctx context.Context, t *testing.T) {
	kcp := &controlplanev1.KubeadmControlPlane{}
	if err := s.c.Get(ctx, client.ObjectKey{Namespace: s.ns, Name: s.name}, kcp); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		m, err := s.create(ctx, kcp)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.join(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	s.mu.Lock()
	s.lastJoined = time.Time{}
	s.mu.Unlock()
	if err := s.updateStatus(ctx, kcp); err != nil {
		t.Fatal(err)
	}
}

func (s *kcpSim) create(ctx context.Context, kcp *controlplanev1.KubeadmControlPlane) (*clusterv1.Machine, error) {
	s.mu.Lock()
	s.next++
	name := fmt.Sprintf("cp-%d", s.next)
	s.mu.Unlock()
	m := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: name,
			Labels:      map[string]string{clusterv1.MachineControlPlaneNameLabel: kcp.Name, clusterv1.ClusterNameLabel: s.name},
			Annotations: map[string]string{configAnnotation: configOf(kcp)},
			Finalizers:  []string{clusterv1.MachineFinalizer}},
		Spec: clusterv1.MachineSpec{
			ClusterName: s.name,
			Version:     kcp.Spec.Version,
			Bootstrap:   clusterv1.Bootstrap{DataSecretName: ptr.To(name + "-bootstrap")},
			// The HCloudMachine cloned from the template, named like the
			// Machine; CAPH names the server after it.
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: kcp.Spec.MachineTemplate.Spec.InfrastructureRef.APIGroup,
				Kind: "HCloudMachine", Name: name},
		},
	}
	if err := s.c.Create(ctx, m); err != nil {
		return nil, err
	}
	if s.hcloud != nil {
		var n int
		fmt.Sscanf(name, "cp-%d", &n)
		id := s.hcloud.AddServer(hcloudfake.ServerSpec{Name: name, Location: "fsn1", IPv4: fmt.Sprintf("192.0.2.%d", n), PrivateIP: fmt.Sprintf("10.0.0.%d", n)})
		s.mu.Lock()
		if s.servers == nil {
			s.servers = map[string]int64{}
		}
		s.servers[name] = id
		s.mu.Unlock()
	}
	return m, nil
}

// serverID is the fake Hetzner server of a Machine.
func (s *kcpSim) serverID(machine string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.servers[machine]
}

// finishDeletion is Cluster API's machine controller on a Machine being
// deleted that no hook holds: its server goes (CAPH deletes it through the
// API), then the finalizer.
func (s *kcpSim) finishDeletion(ctx context.Context, m *clusterv1.Machine) error {
	if s.hclient != nil {
		srv, _, err := s.hclient.Server.GetByName(ctx, m.Name)
		if err != nil {
			return err
		}
		if srv != nil {
			if _, _, err := s.hclient.Server.DeleteWithResult(ctx, srv); err != nil {
				return err
			}
		}
	}
	base := m.DeepCopy()
	controllerutil.RemoveFinalizer(m, clusterv1.MachineFinalizer)
	return s.c.Patch(ctx, m, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
}

func (s *kcpSim) join(ctx context.Context, m *clusterv1.Machine) error {
	var n int
	fmt.Sscanf(m.Name, "cp-%d", &n)
	if err := platformtest.JoinMachine(ctx, s.c, m, m.Name, fmt.Sprintf("10.0.0.%d", n)); err != nil {
		return err
	}
	s.mu.Lock()
	s.lastJoined = time.Now()
	s.mu.Unlock()
	return nil
}

// run steps the simulator until ctx ends.
func (s *kcpSim) run(ctx context.Context) {
	for {
		_ = s.step(ctx)
		select {
		case <-ctx.Done():
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (s *kcpSim) step(ctx context.Context) error {
	cluster := &clusterv1.Cluster{}
	if err := s.c.Get(ctx, client.ObjectKey{Namespace: s.ns, Name: s.name}, cluster); err != nil {
		return err
	}
	kcp := &controlplanev1.KubeadmControlPlane{}
	if err := s.c.Get(ctx, client.ObjectKey{Namespace: s.ns, Name: s.name}, kcp); err != nil {
		return err
	}
	if ptr.Deref(cluster.Spec.Paused, false) {
		return s.updateStatus(ctx, kcp)
	}
	machines, err := s.machines(ctx)
	if err != nil {
		return err
	}
	deleting := false
	for i := range machines {
		m := &machines[i]
		if m.DeletionTimestamp.IsZero() {
			continue
		}
		deleting = true
		if !platformtest.HasDeletionHook(m) && controllerutil.ContainsFinalizer(m, clusterv1.MachineFinalizer) {
			if err := s.finishDeletion(ctx, m); err != nil {
				return err
			}
			return s.updateStatus(ctx, kcp)
		}
	}
	for i := range machines {
		if m := &machines[i]; !platformtest.MachineJoined(m) && m.DeletionTimestamp.IsZero() && time.Since(m.CreationTimestamp.Time) >= s.joinAfter {
			if err := s.join(ctx, m); err != nil {
				return err
			}
			return s.updateStatus(ctx, kcp)
		}
	}
	var outdated []clusterv1.Machine
	allJoined := true
	for _, m := range machines {
		if m.Spec.Version != kcp.Spec.Version || m.Annotations[configAnnotation] != configOf(kcp) {
			outdated = append(outdated, m)
		}
		allJoined = allJoined && platformtest.MachineJoined(&m)
	}
	s.mu.Lock()
	settled := time.Since(s.lastJoined) >= s.settle
	s.mu.Unlock()
	switch {
	case deleting:
		// KCP waits until the machine it deleted is gone.
	case len(machines) < 3:
		if _, err := s.create(ctx, kcp); err != nil {
			return err
		}
	case len(outdated) > 0 && allJoined && settled:
		old := outdated[0]
		if err := s.c.Delete(ctx, &old); err != nil {
			return err
		}
		s.mu.Lock()
		s.deleted = append(s.deleted, old.Name)
		s.mu.Unlock()
	}
	return s.updateStatus(ctx, kcp)
}

func (s *kcpSim) machines(ctx context.Context) ([]clusterv1.Machine, error) {
	var list clusterv1.MachineList
	if err := s.c.List(ctx, &list, client.InNamespace(s.ns), client.MatchingLabels{clusterv1.MachineControlPlaneNameLabel: s.name}); err != nil {
		return nil, err
	}
	sort.Slice(list.Items, func(i, j int) bool {
		var a, b int
		fmt.Sscanf(list.Items[i].Name, "cp-%d", &a)
		fmt.Sscanf(list.Items[j].Name, "cp-%d", &b)
		return a < b
	})
	return list.Items, nil
}

func (s *kcpSim) updateStatus(ctx context.Context, kcp *controlplanev1.KubeadmControlPlane) error {
	machines, err := s.machines(ctx)
	if err != nil {
		return err
	}
	var ready, upToDate int32
	versions := map[string]int32{}
	for _, m := range machines {
		versions[m.Spec.Version]++
		if platformtest.MachineJoined(&m) {
			ready++
			if m.Spec.Version == kcp.Spec.Version && m.Annotations[configAnnotation] == configOf(kcp) {
				upToDate++
			}
		}
	}
	base := kcp.DeepCopy()
	kcp.Status.Replicas = ptr.To(int32(len(machines)))
	kcp.Status.ReadyReplicas, kcp.Status.AvailableReplicas, kcp.Status.UpToDateReplicas = ptr.To(ready), ptr.To(ready), ptr.To(upToDate)
	kcp.Status.Versions = nil
	for v, n := range versions {
		kcp.Status.Versions = append(kcp.Status.Versions, clusterv1.StatusVersion{Version: v, Replicas: n})
	}
	sort.Slice(kcp.Status.Versions, func(i, j int) bool { return kcp.Status.Versions[i].Version < kcp.Status.Versions[j].Version })
	kcp.Status.ObservedGeneration = kcp.Generation
	return s.c.Status().Patch(ctx, kcp, client.MergeFrom(base))
}

// deletedMachines returns the Machines the simulator marked for deletion,
// in order (some may still be held by a deletion hook).
func (s *kcpSim) deletedMachines() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.deleted...)
}

// fakeVerifier passes every round.
type fakeVerifier struct{}

var devicetaintrules = schema.GroupVersionResource{Group: "resource.k8s.io", Version: "v1", Resource: "devicetaintrules"}

func (fakeVerifier) Verify(_ context.Context, targets []verify.Target) (verify.Report, error) {
	return passing(targets), nil
}

func passing(targets []verify.Target) verify.Report {
	var rep verify.Report
	for _, t := range targets {
		rep.Probes = append(rep.Probes, verify.Probe{APIServer: t.Name, Resource: devicetaintrules, Verb: "list", Status: 200, Outcome: verify.Proxied, At: time.Now()})
	}
	return rep
}

// fakeRecords keeps what the controller records in memory.
type fakeRecords struct {
	mu     sync.Mutex
	runs   map[string]*store.UpgradeRun
	steps  []store.UpgradeStep
	probes map[string][]store.ProbeSample
}

var _ fleetupgrade.Records = (*fakeRecords)(nil)

func (f *fakeRecords) StartUpgradeRun(_ context.Context, n store.NewUpgradeRun) (store.UpgradeRun, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.runs == nil {
		f.runs = map[string]*store.UpgradeRun{}
	}
	if r, ok := f.runs[n.UID]; ok {
		return *r, nil
	}
	r := &store.UpgradeRun{ID: "run-" + n.UID, FleetUpgrade: n.FleetUpgrade, UID: n.UID, TargetVersion: n.TargetVersion, State: store.UpgradeRunning}
	f.runs[n.UID] = r
	return *r, nil
}

func (f *fakeRecords) SetUpgradeRunState(_ context.Context, runID string, state store.UpgradeRunState, message string) (store.UpgradeRun, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range f.runs {
		if r.ID == runID {
			if r.State.Final() {
				return store.UpgradeRun{}, store.ErrNotFound
			}
			r.State, r.Message = state, message
			return *r, nil
		}
	}
	return store.UpgradeRun{}, store.ErrNotFound
}

func (f *fakeRecords) StartUpgradeStep(_ context.Context, runID string, n store.NewUpgradeStep) (store.UpgradeStep, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	// As the store: a machine's join is recorded once per run and cluster.
	for _, st := range f.steps {
		if n.Kind == fleetupgrade.StepKindMachine && st.RunID == runID && st.Kind == n.Kind && st.Cluster == n.Cluster && st.Machine == n.Machine {
			return st, nil
		}
	}
	st := store.UpgradeStep{ID: fmt.Sprintf("step-%d", len(f.steps)+1), RunID: runID, Seq: len(f.steps) + 1, Cluster: n.Cluster, Kind: n.Kind,
		Machine: n.Machine, FromVersion: n.FromVersion, ToVersion: n.ToVersion, Outcome: store.StepRunning}
	f.steps = append(f.steps, st)
	return st, nil
}

func (f *fakeRecords) FinishUpgradeStep(_ context.Context, stepID string, outcome store.UpgradeStepOutcome, message string) (store.UpgradeStep, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range f.steps {
		if f.steps[i].ID == stepID {
			f.steps[i].Outcome, f.steps[i].Message = outcome, message
			return f.steps[i], nil
		}
	}
	return store.UpgradeStep{}, store.ErrNotFound
}

func (f *fakeRecords) RecordProbes(_ context.Context, stepID string, samples []store.ProbeSample) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.probes == nil {
		f.probes = map[string][]store.ProbeSample{}
	}
	f.probes[stepID] = append(f.probes[stepID], samples...)
	return nil
}

// stepsOf returns the recorded steps of a kind, in order.
func (f *fakeRecords) stepsOf(kind string) []store.UpgradeStep {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []store.UpgradeStep
	for _, s := range f.steps {
		if s.Kind == kind {
			out = append(out, s)
		}
	}
	return out
}

// newUpgrade is a FleetUpgrade to target of the clusters labelled
// fleet=selectorValue, with no soak time; mut changes its spec.
func newUpgrade(name, target, selectorValue string, mut ...func(*fleetv1.FleetUpgradeSpec)) *fleetv1.FleetUpgrade {
	fu := &fleetv1.FleetUpgrade{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: fleetv1.FleetUpgradeSpec{
			TargetVersion:   target,
			ClusterSelector: metav1.LabelSelector{MatchLabels: map[string]string{"fleet": selectorValue}},
			SoakTime:        &metav1.Duration{},
		},
	}
	for _, m := range mut {
		m(&fu.Spec)
	}
	return fu
}

func (e *env) machines(ns, kcp string) map[string]string {
	e.t.Helper()
	var list clusterv1.MachineList
	if err := e.c.List(e.ctx, &list, client.InNamespace(ns), client.MatchingLabels{clusterv1.MachineControlPlaneNameLabel: kcp}); err != nil {
		e.t.Fatal(err)
	}
	out := map[string]string{}
	for _, m := range list.Items {
		out[m.Name] = m.Spec.Version
	}
	return out
}

func clusterStatus(fu *fleetv1.FleetUpgrade, name string) *fleetv1.ClusterUpgradeStatus {
	for i := range fu.Status.Clusters {
		if fu.Status.Clusters[i].Name == name {
			return &fu.Status.Clusters[i]
		}
	}
	return nil
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
