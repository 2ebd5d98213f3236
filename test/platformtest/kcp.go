package platformtest

import (
	"context"
	"slices"
	"strings"

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
