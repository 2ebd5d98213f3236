package fleetstate

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// clusterState builds one cluster's state from the index and the nodes of
// its workload cluster. It records the node watch it reads in used.
func (c *CAPI) clusterState(ctx context.Context, idx *clusterIndex, cl *clusterv1.Cluster, used map[string]bool) Cluster {
	fc := newCluster(cl)
	observeControlPlane(cl, idx, &fc)
	observeAvailable(cl, &fc)
	w, err := c.nodeWatchFor(ctx, cl, idx.secrets, used)
	observeNodeWatch(w, err, c.opts.NodeErrorGrace, &fc)
	fc.Pools = pools(idx, cl, w)
	return fc
}

// newCluster returns the cluster as its labels and annotations describe it,
// healthy until observed otherwise.
func newCluster(cl *clusterv1.Cluster) Cluster {
	fc := Cluster{
		Name:      cl.Name,
		Namespace: cl.Namespace,
		Source:    SourceClusterAPI,
		Region:    cl.Labels[RegionLabel],
		Cordoned:  cl.Annotations[CordonedAnnotation] == "true",
		Deleting:  !cl.DeletionTimestamp.IsZero(),
		Healthy:   true,
	}
	if p := strings.TrimSpace(cl.Annotations[PlansAnnotation]); p != "" {
		for _, s := range strings.Split(p, ",") {
			fc.Plans = append(fc.Plans, strings.TrimSpace(s))
		}
		sort.Strings(fc.Plans)
	}
	return fc
}

// observeControlPlane fills in the control plane's versions and whether it
// is mid-upgrade, from the KubeadmControlPlane the Cluster references.
func observeControlPlane(cl *clusterv1.Cluster, idx *clusterIndex, fc *Cluster) {
	ref := cl.Spec.ControlPlaneRef
	if ref.Kind != "KubeadmControlPlane" || ref.Name == "" {
		return
	}
	kcp, ok := idx.controlPlane(cl, ref.Name)
	if !ok {
		fc.Healthy = false
		fc.HealthMessage = joinMsg(fc.HealthMessage, "KubeadmControlPlane "+ref.Name+" not found")
		return
	}
	var msgs []string
	for _, v := range kcp.Status.Versions {
		fc.ControlPlaneVersions = append(fc.ControlPlaneVersions, strings.TrimPrefix(v.Version, "v"))
		msgs = append(msgs, fmt.Sprintf("%s ×%d", v.Version, v.Replicas))
	}
	sort.Strings(fc.ControlPlaneVersions)
	want := strings.TrimPrefix(kcp.Spec.Version, "v")
	switch {
	case len(kcp.Status.Versions) > 1:
		fc.MidUpgrade = true
		fc.UpgradeMessage = "control plane runs " + strings.Join(msgs, ", ")
	case meta.IsStatusConditionTrue(kcp.Status.Conditions, controlplanev1.KubeadmControlPlaneRollingOutCondition):
		fc.MidUpgrade = true
		fc.UpgradeMessage = "control plane is rolling out"
	case len(fc.ControlPlaneVersions) == 1 && want != "" && want != fc.ControlPlaneVersions[0]:
		fc.MidUpgrade = true
		fc.UpgradeMessage = "control plane runs " + fc.ControlPlaneVersions[0] + ", upgrade to " + want + " requested"
	}
}

// observeAvailable marks the cluster unhealthy unless its Available
// condition is true. Its message replaces the health message so far.
func observeAvailable(cl *clusterv1.Cluster, fc *Cluster) {
	cond := meta.FindStatusCondition(cl.Status.Conditions, clusterv1.ClusterAvailableCondition)
	if cond != nil && cond.Status == metav1.ConditionTrue {
		return
	}
	fc.Healthy = false
	fc.HealthMessage = "Cluster is not Available"
	if cond != nil && cond.Message != "" {
		fc.HealthMessage += ": " + cond.Message
	}
}

// observeNodeWatch marks the cluster unhealthy when its nodes cannot be
// read: no watch (err says why), a watch not synced yet, or one whose last
// read failed within grace.
func observeNodeWatch(w *nodeWatch, err error, grace time.Duration, fc *Cluster) {
	switch {
	case err != nil:
		fc.Healthy = false
		fc.HealthMessage = joinMsg(fc.HealthMessage, err.Error())
	case !w.synced():
		fc.Healthy = false
		fc.HealthMessage = joinMsg(fc.HealthMessage, "nodes not read yet")
	default:
		if err := w.recentError(grace); err != nil {
			fc.Healthy = false
			fc.HealthMessage = joinMsg(fc.HealthMessage, "reading nodes: "+err.Error())
		}
	}
}

// pools returns a pool per MachineDeployment of the cluster, sorted by name,
// counting the nodes its Machines reference; w nil counts none.
func pools(idx *clusterIndex, cl *clusterv1.Cluster, w *nodeWatch) []Pool {
	var out []Pool
	for _, md := range idx.deploymentsOf(cl) {
		pool := Pool{Name: md.Name}
		for _, m := range idx.machinesOf(cl, md) {
			if m.Status.NodeRef.Name == "" || w == nil {
				continue
			}
			node, ok := w.node(m.Status.NodeRef.Name)
			if !ok {
				continue
			}
			pool.Nodes++
			if !nodeReady(node) {
				if since := notReadySince(node); since.After(pool.NotReadySince) {
					pool.NotReadySince = since
				}
				continue
			}
			pool.ReadyNodes++
			pool.Allocatable.Add(Resources{
				CPU:    node.Status.Allocatable.Cpu().DeepCopy(),
				Memory: node.Status.Allocatable.Memory().DeepCopy(),
				Pods:   node.Status.Allocatable.Pods().Value(),
			})
		}
		if pool.ReadyNodes > 0 {
			pool.NotReadySince = time.Time{}
		}
		out = append(out, pool)
	}
	return out
}

func joinMsg(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// notReadySince is when a node that is not Ready left Ready: its Ready
// condition's last transition, or its creation when it has none.
func notReadySince(n *corev1.Node) time.Time {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady && !c.LastTransitionTime.IsZero() {
			return c.LastTransitionTime.Time
		}
	}
	return n.CreationTimestamp.Time
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
