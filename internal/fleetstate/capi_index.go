package fleetstate

import (
	"context"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// clusterIndex is one listing of the Cluster API objects in the cache, keyed
// by what they belong to. Its objects are the cache's own: read them, never
// write them.
type clusterIndex struct {
	// clusters is sorted by name, then by namespace.
	clusters []*clusterv1.Cluster
	// kcps and secrets are by namespace/name.
	kcps    map[string]*controlplanev1.KubeadmControlPlane
	secrets map[string]*corev1.Secret
	// deployments is by namespace/cluster, each sorted by name.
	deployments map[string][]*clusterv1.MachineDeployment
	// machines is by namespace/cluster/deployment; machines of no
	// MachineDeployment are left out.
	machines map[string][]*clusterv1.Machine
}

// index lists the clusters, their control planes, machine deployments,
// machines and kubeconfig Secrets from the cache.
func (c *CAPI) index(ctx context.Context) (*clusterIndex, error) {
	noCopy := client.UnsafeDisableDeepCopy
	var clusters clusterv1.ClusterList
	if err := c.cache.List(ctx, &clusters, noCopy); err != nil {
		return nil, fmt.Errorf("listing clusters: %w", err)
	}
	var mds clusterv1.MachineDeploymentList
	if err := c.cache.List(ctx, &mds, noCopy); err != nil {
		return nil, fmt.Errorf("listing machinedeployments: %w", err)
	}
	var machines clusterv1.MachineList
	if err := c.cache.List(ctx, &machines, noCopy); err != nil {
		return nil, fmt.Errorf("listing machines: %w", err)
	}
	var kcps controlplanev1.KubeadmControlPlaneList
	if err := c.cache.List(ctx, &kcps, noCopy); err != nil {
		return nil, fmt.Errorf("listing kubeadmcontrolplanes: %w", err)
	}
	var secrets corev1.SecretList
	if err := c.cache.List(ctx, &secrets, noCopy); err != nil {
		return nil, fmt.Errorf("listing secrets: %w", err)
	}
	return &clusterIndex{
		clusters:    sortedClusters(clusters.Items),
		kcps:        byKey(kcps.Items),
		secrets:     byKey(secrets.Items),
		deployments: deploymentsByCluster(mds.Items),
		machines:    machinesByDeployment(machines.Items),
	}, nil
}

// controlPlane returns the KubeadmControlPlane of the given name in the
// cluster's namespace.
func (x *clusterIndex) controlPlane(cl *clusterv1.Cluster, name string) (*controlplanev1.KubeadmControlPlane, bool) {
	kcp, ok := x.kcps[cl.Namespace+"/"+name]
	return kcp, ok
}

// deploymentsOf returns the cluster's MachineDeployments, sorted by name.
func (x *clusterIndex) deploymentsOf(cl *clusterv1.Cluster) []*clusterv1.MachineDeployment {
	return x.deployments[cl.Namespace+"/"+cl.Name]
}

// machinesOf returns the Machines of one of the cluster's MachineDeployments.
func (x *clusterIndex) machinesOf(cl *clusterv1.Cluster, md *clusterv1.MachineDeployment) []*clusterv1.Machine {
	return x.machines[cl.Namespace+"/"+cl.Name+"/"+md.Name]
}

// sortedClusters returns pointers to the clusters, sorted by name, then by
// namespace.
func sortedClusters(items []clusterv1.Cluster) []*clusterv1.Cluster {
	out := make([]*clusterv1.Cluster, len(items))
	for i := range items {
		out[i] = &items[i]
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		return a.Namespace < b.Namespace
	})
	return out
}

// byKey maps objects by namespace/name.
func byKey[T any, PT interface {
	*T
	client.Object
}](items []T) map[string]PT {
	out := make(map[string]PT, len(items))
	for i := range items {
		o := PT(&items[i])
		out[o.GetNamespace()+"/"+o.GetName()] = o
	}
	return out
}

// deploymentsByCluster maps MachineDeployments by namespace/cluster, each
// list sorted by name.
func deploymentsByCluster(items []clusterv1.MachineDeployment) map[string][]*clusterv1.MachineDeployment {
	out := map[string][]*clusterv1.MachineDeployment{}
	for i := range items {
		md := &items[i]
		k := md.Namespace + "/" + md.Spec.ClusterName
		out[k] = append(out[k], md)
	}
	for _, mds := range out {
		sort.Slice(mds, func(i, j int) bool { return mds[i].Name < mds[j].Name })
	}
	return out
}

// machinesByDeployment maps Machines by namespace/cluster/deployment,
// leaving out those of no MachineDeployment.
func machinesByDeployment(items []clusterv1.Machine) map[string][]*clusterv1.Machine {
	out := map[string][]*clusterv1.Machine{}
	for i := range items {
		m := &items[i]
		md := m.Labels[clusterv1.MachineDeploymentNameLabel]
		if md == "" {
			continue
		}
		k := m.Namespace + "/" + m.Spec.ClusterName + "/" + md
		out[k] = append(out[k], m)
	}
	return out
}
