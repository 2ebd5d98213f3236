package platformtest

import (
	"context"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ControlPlane returns the KubeadmControlPlane ns/name and its machines,
// oldest first, for tests that play KubeadmControlPlane.
func ControlPlane(ctx context.Context, c client.Client, ns, name string) (*controlplanev1.KubeadmControlPlane, []clusterv1.Machine, error) {
	kcp := &controlplanev1.KubeadmControlPlane{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, kcp); err != nil {
		return nil, nil, err
	}
	var list clusterv1.MachineList
	if err := c.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{clusterv1.MachineControlPlaneNameLabel: name}); err != nil {
		return nil, nil, err
	}
	slices.SortFunc(list.Items, func(a, b clusterv1.Machine) int { return a.CreationTimestamp.Compare(b.CreationTimestamp.Time) })
	return kcp, list.Items, nil
}

// WriteControlPlaneStatus writes the KubeadmControlPlane ns/name's status
// from its machines, as KubeadmControlPlane would: replicas, up-to-date
// replicas, the versions they run, the generation observed.
func WriteControlPlaneStatus(ctx context.Context, c client.Client, ns, name string) error {
	kcp, machines, err := ControlPlane(ctx, c, ns, name)
	if err != nil {
		return err
	}
	var upToDate int32
	versions := map[string]int32{}
	for _, m := range machines {
		versions[m.Spec.Version]++
		if m.Spec.Version == kcp.Spec.Version {
			upToDate++
		}
	}
	n := int32(len(machines))
	kcp.Status.Replicas, kcp.Status.ReadyReplicas, kcp.Status.AvailableReplicas, kcp.Status.UpToDateReplicas = &n, &n, &n, &upToDate
	kcp.Status.Versions = nil
	for v, count := range versions {
		kcp.Status.Versions = append(kcp.Status.Versions, clusterv1.StatusVersion{Version: v, Replicas: count})
	}
	slices.SortFunc(kcp.Status.Versions, func(a, b clusterv1.StatusVersion) int { return strings.Compare(a.Version, b.Version) })
	kcp.Status.ObservedGeneration = kcp.Generation
	return c.Status().Update(ctx, kcp)
}

// HasDeletionHook reports whether a Cluster API deletion hook holds the
// Machine: an annotation with the pre-drain or pre-terminate prefix.
// Cluster API's machine controller neither drains nor deletes a Machine
// that carries one.
func HasDeletionHook(m *clusterv1.Machine) bool {
	for k := range m.Annotations {
		if strings.HasPrefix(k, clusterv1.PreDrainDeleteHookAnnotationPrefix) || strings.HasPrefix(k, clusterv1.PreTerminateDeleteHookAnnotationPrefix) {
			return true
		}
	}
	return false
}

// FinishMachineDeletion ends the deletion of a Machine no hook holds, as
// Cluster API's machine controller does once its node and infrastructure
// are gone: it removes the Machine's finalizer.
func FinishMachineDeletion(ctx context.Context, c client.Client, m *clusterv1.Machine) error {
	base := m.DeepCopy()
	m.Finalizers = slices.DeleteFunc(m.Finalizers, func(f string) bool { return f == clusterv1.MachineFinalizer })
	return c.Patch(ctx, m, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
}

// JoinMachine writes what Cluster API records of a Machine whose node
// joined: its node reference (nodeName), a HostName address of the node's
// name and an InternalIP of ip, and the APIServerPodHealthy condition. It
// patches the status without an optimistic lock, as the Machine
// controller's patch helper does, so that an annotation written beside it
// (the FleetUpgrade controller's deletion hooks) does not make it fail.
func JoinMachine(ctx context.Context, c client.Client, m *clusterv1.Machine, nodeName, ip string) error {
	base := m.DeepCopy()
	m.Status.NodeRef = clusterv1.MachineNodeReference{Name: nodeName}
	m.Status.Addresses = clusterv1.MachineAddresses{{Type: clusterv1.MachineHostName, Address: nodeName}, {Type: clusterv1.MachineInternalIP, Address: ip}}
	meta.SetStatusCondition(&m.Status.Conditions, metav1.Condition{Type: controlplanev1.KubeadmControlPlaneMachineAPIServerPodHealthyCondition,
		Status: metav1.ConditionTrue, Reason: "PodHealthy"})
	return c.Status().Patch(ctx, m, client.MergeFrom(base))
}

// MachineJoined reports whether JoinMachine (or Cluster API) marked the
// Machine's apiserver healthy.
func MachineJoined(m *clusterv1.Machine) bool {
	return meta.IsStatusConditionTrue(m.Status.Conditions, controlplanev1.KubeadmControlPlaneMachineAPIServerPodHealthyCondition)
}
