package continuity_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"bex.co/bex/internal/controlplane"
	"bex.co/bex/internal/upgrade/plan"
	"bex.co/bex/internal/upgrade/preflight"
	"bex.co/bex/internal/upgrade/rollout"
	"bex.co/bex/test/platformtest"
)

// managementCluster describes the platform's own control plane to Cluster
// API (a Cluster labelled the management cluster, its
// KubeadmControlPlane, a Machine per apiserver) and plays
// KubeadmControlPlane's maxSurge-0 rollout on the real apiservers: while
// the Cluster is not paused and a Machine runs another version than the
// KubeadmControlPlane, it marks the oldest such Machine for deletion; once
// no deletion hook holds it (as Cluster API's machine controller waits),
// it drains its apiserver out of the load balancer, stops it, lets the
// Machine go, starts its replacement at the new version and creates its
// Machine once it is ready. The FleetUpgrade controller of the platform
// gates it through the Machines' deletion hook, as it gates
// KubeadmControlPlane.
type managementCluster struct {
	cp   *controlplane.ControlPlane
	kube client.Client

	mu         sync.Mutex
	events     []rollout.Event
	replaced   int
	lastJoined time.Time
}

const (
	fleetNamespace  = "bex-fleet"
	clusterName     = "management"
	settleAfterJoin = 3 * time.Second
)

// create writes the Cluster API objects of the running plane. The
// KubeadmControlPlane's apiServer.extraArgs wire MVP (preflight passes),
// also when the servers themselves run without it: a flag that does not
// reach the servers is what only the verifier sees.
func (m *managementCluster) create(ctx context.Context, kubeconfigPath string) error {
	if err := m.kube.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fleetNamespace}}); err != nil {
		return err
	}
	servers := m.cp.APIServers()
	kcp := &controlplanev1.KubeadmControlPlane{
		ObjectMeta: metav1.ObjectMeta{Namespace: fleetNamespace, Name: clusterName},
		Spec: controlplanev1.KubeadmControlPlaneSpec{
			Replicas: ptr.To(int32(len(servers))),
			Version:  "v" + fromVersion,
			MachineTemplate: controlplanev1.KubeadmControlPlaneMachineTemplate{Spec: controlplanev1.KubeadmControlPlaneMachineTemplateSpec{
				InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "LocalMachineTemplate", Name: clusterName},
			}},
			Rollout: controlplanev1.KubeadmControlPlaneRolloutSpec{Strategy: controlplanev1.KubeadmControlPlaneRolloutStrategy{
				Type:          controlplanev1.RollingUpdateStrategyType,
				RollingUpdate: controlplanev1.KubeadmControlPlaneRolloutStrategyRollingUpdate{MaxSurge: ptr.To(intstr.FromInt32(0))},
			}},
		},
	}
	kcp.Spec.KubeadmConfigSpec.ClusterConfiguration.APIServer.ExtraArgs = preflight.WireMVPPatch(kcp, "v"+fromVersion, true)
	cluster := &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: fleetNamespace, Name: clusterName, Labels: map[string]string{plan.ManagementLabel: "true"}},
		Spec: clusterv1.ClusterSpec{
			ControlPlaneRef: clusterv1.ContractVersionedObjectReference{APIGroup: controlplanev1.GroupVersion.Group, Kind: "KubeadmControlPlane", Name: clusterName},
			// The load balancer's address, and the apiservers' port.
			ControlPlaneEndpoint: clusterv1.APIEndpoint{Host: controlplane.LoadBalancerIP, Port: int32(servers[0].Port)},
		},
	}
	kubeconfig, err := os.ReadFile(kubeconfigPath)
	if err != nil {
		return err
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: fleetNamespace, Name: clusterName + "-kubeconfig"}, Data: map[string][]byte{"value": kubeconfig}}
	for _, obj := range []client.Object{cluster, kcp, secret} {
		if err := m.kube.Create(ctx, obj); err != nil {
			return fmt.Errorf("creating %T: %w", obj, err)
		}
	}
	for _, s := range servers {
		if err := m.createMachine(ctx, s); err != nil {
			return err
		}
	}
	m.emit(rollout.PhaseStarted)
	m.lastJoined = time.Time{}
	return m.updateStatus(ctx)
}

func (m *managementCluster) createMachine(ctx context.Context, s *controlplane.APIServer) error {
	mc := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Namespace: fleetNamespace, Name: s.Name, Labels: map[string]string{
			clusterv1.MachineControlPlaneLabel: "", clusterv1.MachineControlPlaneNameLabel: clusterName, clusterv1.ClusterNameLabel: clusterName},
			Finalizers: []string{clusterv1.MachineFinalizer}},
		Spec: clusterv1.MachineSpec{
			ClusterName: clusterName, Version: "v" + s.Version, Bootstrap: clusterv1.Bootstrap{DataSecretName: ptr.To(s.Name + "-bootstrap")},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "LocalMachine", Name: s.Name},
		},
	}
	if err := m.kube.Create(ctx, mc); err != nil {
		return err
	}
	return m.join(ctx, mc, s)
}

// join records that the Machine's apiserver s runs and is healthy. The
// node name is the apiserver's hostname, its identity.
func (m *managementCluster) join(ctx context.Context, mc *clusterv1.Machine, s *controlplane.APIServer) error {
	if err := platformtest.JoinMachine(ctx, m.kube, mc, s.Name, s.IP); err != nil {
		return fmt.Errorf("joining machine %s: %w", mc.Name, err)
	}
	m.mu.Lock()
	m.lastJoined = time.Now()
	m.mu.Unlock()
	return nil
}

// run steps the control plane until ctx ends.
func (m *managementCluster) run(ctx context.Context, logf func(string, ...any)) {
	for ctx.Err() == nil {
		if err := m.step(ctx); err != nil && ctx.Err() == nil {
			logf("control plane: %v", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (m *managementCluster) step(ctx context.Context) error {
	cluster := &clusterv1.Cluster{}
	if err := m.kube.Get(ctx, client.ObjectKey{Namespace: fleetNamespace, Name: clusterName}, cluster); err != nil {
		return err
	}
	kcp, machines, err := m.observe(ctx)
	if err != nil {
		return err
	}
	m.mu.Lock()
	settled := time.Since(m.lastJoined) >= settleAfterJoin
	m.mu.Unlock()
	if ptr.Deref(cluster.Spec.Paused, false) {
		return m.updateStatus(ctx)
	}
	// A Machine whose join was not recorded (its status write failed) is
	// joined first: its apiserver runs.
	for i := range machines {
		if mc := &machines[i]; mc.DeletionTimestamp.IsZero() && !platformtest.MachineJoined(mc) {
			s := m.cp.APIServer(mc.Name)
			if s == nil {
				return fmt.Errorf("machine %s has no apiserver", mc.Name)
			}
			if err := m.join(ctx, mc, s); err != nil {
				return err
			}
			return m.updateStatus(ctx)
		}
	}
	// One machine at a time: a Machine marked for deletion goes once no
	// hook holds it, and only then is its replacement made.
	d := slices.IndexFunc(machines, func(mc clusterv1.Machine) bool { return !mc.DeletionTimestamp.IsZero() })
	if d >= 0 {
		if platformtest.HasDeletionHook(&machines[d]) {
			return m.updateStatus(ctx)
		}
		return m.replace(ctx, kcp, &machines[d])
	}
	i := slices.IndexFunc(machines, func(mc clusterv1.Machine) bool { return mc.Spec.Version != kcp.Spec.Version })
	if i < 0 || len(machines) != 3 || !settled {
		return m.updateStatus(ctx)
	}
	if err := m.kube.Delete(ctx, &machines[i]); err != nil {
		return err
	}
	return m.updateStatus(ctx)
}

// replace stops the apiserver of a Machine no hook holds any more, lets
// the Machine go, and starts its replacement at the control plane's
// version.
func (m *managementCluster) replace(ctx context.Context, kcp *controlplanev1.KubeadmControlPlane, mc *clusterv1.Machine) error {
	old := m.cp.APIServer(mc.Name)
	if old == nil {
		return fmt.Errorf("machine %s has no apiserver", mc.Name)
	}
	if err := m.cp.DrainAPIServer(ctx, old.Name); err != nil {
		return fmt.Errorf("draining %s: %w", old.Name, err)
	}
	if err := m.cp.StopAPIServer(old.Name); err != nil {
		return fmt.Errorf("stopping %s: %w", old.Name, err)
	}
	m.emit(rollout.PhaseStopped)
	if err := platformtest.FinishMachineDeletion(ctx, m.kube, mc); err != nil {
		return err
	}
	spec := old.Spec
	spec.Version = strings.TrimPrefix(kcp.Spec.Version, "v")
	spec.Name = replacementName(old.Name, spec.Version)
	s, err := m.cp.StartAPIServer(ctx, spec)
	if err != nil {
		return fmt.Errorf("starting %s: %w", spec.Name, err)
	}
	m.emit(rollout.PhaseReady)
	m.mu.Lock()
	m.replaced++
	m.mu.Unlock()
	if err := m.createMachine(ctx, s); err != nil {
		return err
	}
	return m.updateStatus(ctx)
}

func replacementName(old, version string) string {
	base, _, _ := strings.Cut(old, "-v")
	return base + "-v" + strings.ReplaceAll(version, ".", "-")
}

func (m *managementCluster) observe(ctx context.Context) (*controlplanev1.KubeadmControlPlane, []clusterv1.Machine, error) {
	return platformtest.ControlPlane(ctx, m.kube, fleetNamespace, clusterName)
}

func (m *managementCluster) updateStatus(ctx context.Context) error {
	return platformtest.WriteControlPlaneStatus(ctx, m.kube, fleetNamespace, clusterName)
}

// emit keeps the running apiservers at a moment, for the timeline.
func (m *managementCluster) emit(p rollout.Phase) {
	e := rollout.Event{Time: time.Now(), Phase: p}
	for _, s := range m.cp.APIServers() {
		if s.Running() {
			e.Servers = append(e.Servers, rollout.Server{Name: s.Name, Version: s.Version})
		}
	}
	m.mu.Lock()
	m.events = append(m.events, e)
	m.mu.Unlock()
}

func (m *managementCluster) result() ([]rollout.Event, int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.events), m.replaced
}
