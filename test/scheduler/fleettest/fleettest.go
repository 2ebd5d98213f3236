package fleettest

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	schedulingv1alpha1 "bex.co/bex/apis/scheduling/v1alpha1"
	"bex.co/bex/internal/fleetstate"
)

// NewScheme returns a scheme with the built-in kinds, Cluster API's and
// scheduling.bex.co/v1alpha1.
func NewScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(clusterv1.AddToScheme(s))
	utilruntime.Must(controlplanev1.AddToScheme(s))
	utilruntime.Must(schedulingv1alpha1.AddToScheme(s))
	return s
}

// Node is a workload node.
type Node struct {
	Name   string
	CPU    string
	Memory string
	Pods   int64
	Ready  bool
}

// Pool is a MachineDeployment with one Machine per node.
type Pool struct {
	Name  string
	Nodes []Node
}

// Version is one entry of KubeadmControlPlane status.versions.
type Version struct {
	Version  string
	Replicas int32
}

// Cluster is a workload cluster to seed.
type Cluster struct {
	Name      string
	Namespace string
	Region    string
	// Plans is the scheduling.bex.co/plans annotation ("" = none).
	Plans string
	// SpecVersion is the KubeadmControlPlane's spec.version.
	SpecVersion string
	// Versions is the KubeadmControlPlane's status.versions.
	Versions []Version
	// Unavailable sets the Cluster's Available condition to False.
	Unavailable bool
	Pools       []Pool
}

// Seed writes the cluster: its objects in the management cluster (through
// mgmt), its kubeconfig Secret (holding kubeconfig) and its nodes in the
// workload control plane (through work).
func Seed(ctx context.Context, mgmt, work client.Client, kubeconfig []byte, c Cluster) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: c.Namespace}}
	if err := mgmt.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace: %w", err)
	}
	infra := clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "HetznerCluster", Name: c.Name}
	machineInfra := clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "HCloudMachine", Name: c.Name}
	cl := &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: c.Name, Namespace: c.Namespace, Labels: map[string]string{}, Annotations: map[string]string{}},
		Spec: clusterv1.ClusterSpec{
			ControlPlaneRef:   clusterv1.ContractVersionedObjectReference{APIGroup: controlplanev1.GroupVersion.Group, Kind: "KubeadmControlPlane", Name: c.Name},
			InfrastructureRef: infra,
		},
	}
	if c.Region != "" {
		cl.Labels[fleetstate.RegionLabel] = c.Region
	}
	if c.Plans != "" {
		cl.Annotations[fleetstate.PlansAnnotation] = c.Plans
	}
	if err := mgmt.Create(ctx, cl); err != nil {
		return fmt.Errorf("creating cluster %s: %w", c.Name, err)
	}
	status := metav1.ConditionTrue
	if c.Unavailable {
		status = metav1.ConditionFalse
	}
	cl.Status.Conditions = []metav1.Condition{{Type: clusterv1.ClusterAvailableCondition, Status: status, Reason: "Seeded", Message: "seeded by the test", LastTransitionTime: metav1.Now()}}
	if err := mgmt.Status().Update(ctx, cl); err != nil {
		return fmt.Errorf("updating cluster status: %w", err)
	}
	kcp := &controlplanev1.KubeadmControlPlane{
		ObjectMeta: metav1.ObjectMeta{Name: c.Name, Namespace: c.Namespace},
		Spec: controlplanev1.KubeadmControlPlaneSpec{
			Replicas:        ptr.To[int32](3),
			Version:         c.SpecVersion,
			MachineTemplate: controlplanev1.KubeadmControlPlaneMachineTemplate{Spec: controlplanev1.KubeadmControlPlaneMachineTemplateSpec{InfrastructureRef: machineInfra}},
		},
	}
	if err := mgmt.Create(ctx, kcp); err != nil {
		return fmt.Errorf("creating kubeadmcontrolplane %s: %w", c.Name, err)
	}
	if err := SetVersions(ctx, mgmt, c.Namespace, c.Name, c.SpecVersion, c.Versions...); err != nil {
		return err
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: c.Name + "-kubeconfig", Namespace: c.Namespace, Labels: map[string]string{clusterv1.ClusterNameLabel: c.Name}},
		Data:       map[string][]byte{fleetstate.KubeconfigKey: kubeconfig},
		Type:       clusterv1.ClusterSecretType,
	}
	if err := mgmt.Create(ctx, secret); err != nil {
		return fmt.Errorf("creating kubeconfig secret: %w", err)
	}
	for _, p := range c.Pools {
		sel := map[string]string{clusterv1.MachineDeploymentNameLabel: p.Name}
		md := &clusterv1.MachineDeployment{
			ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: c.Namespace},
			Spec: clusterv1.MachineDeploymentSpec{
				ClusterName: c.Name,
				Replicas:    ptr.To(int32(len(p.Nodes))),
				Selector:    metav1.LabelSelector{MatchLabels: sel},
				Template: clusterv1.MachineTemplateSpec{
					ObjectMeta: clusterv1.ObjectMeta{Labels: sel},
					Spec: clusterv1.MachineSpec{
						ClusterName:       c.Name,
						Bootstrap:         clusterv1.Bootstrap{DataSecretName: ptr.To("bootstrap")},
						InfrastructureRef: machineInfra,
					},
				},
			},
		}
		// The pool's name is the MachineDeployment's: clusters that share a
		// namespace need distinct pool names.
		if err := mgmt.Create(ctx, md); err != nil {
			return fmt.Errorf("creating machinedeployment %s: %w", p.Name, err)
		}
		for _, n := range p.Nodes {
			if err := seedMachine(ctx, mgmt, c, p, n, machineInfra); err != nil {
				return err
			}
			if err := SeedNode(ctx, work, n); err != nil {
				return err
			}
		}
	}
	return nil
}

func seedMachine(ctx context.Context, mgmt client.Client, c Cluster, p Pool, n Node, infra clusterv1.ContractVersionedObjectReference) error {
	m := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, Namespace: c.Namespace, Labels: map[string]string{
			clusterv1.ClusterNameLabel:           c.Name,
			clusterv1.MachineDeploymentNameLabel: p.Name,
		}},
		Spec: clusterv1.MachineSpec{
			ClusterName:       c.Name,
			Bootstrap:         clusterv1.Bootstrap{DataSecretName: ptr.To("bootstrap")},
			InfrastructureRef: infra,
		},
	}
	if err := mgmt.Create(ctx, m); err != nil {
		return fmt.Errorf("creating machine %s: %w", n.Name, err)
	}
	m.Status.NodeRef = clusterv1.MachineNodeReference{Name: n.Name}
	if err := mgmt.Status().Update(ctx, m); err != nil {
		return fmt.Errorf("updating machine %s status: %w", n.Name, err)
	}
	return nil
}

// SeedNode creates a Node with the given allocatable resources and Ready
// condition.
func SeedNode(ctx context.Context, work client.Client, n Node) error {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name}}
	if err := work.Create(ctx, node); err != nil {
		return fmt.Errorf("creating node %s: %w", n.Name, err)
	}
	res := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse(n.CPU),
		corev1.ResourceMemory: resource.MustParse(n.Memory),
		corev1.ResourcePods:   *resource.NewQuantity(n.Pods, resource.DecimalSI),
	}
	ready := corev1.ConditionFalse
	if n.Ready {
		ready = corev1.ConditionTrue
	}
	node.Status = corev1.NodeStatus{
		Capacity:    res,
		Allocatable: res,
		Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready, Reason: "Seeded", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}},
	}
	if err := work.Status().Update(ctx, node); err != nil {
		return fmt.Errorf("updating node %s status: %w", n.Name, err)
	}
	return nil
}

// SetVersions sets a KubeadmControlPlane's spec.version and
// status.versions, as a rollout does.
func SetVersions(ctx context.Context, mgmt client.Client, namespace, name, spec string, versions ...Version) error {
	kcp := &controlplanev1.KubeadmControlPlane{}
	if err := mgmt.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, kcp); err != nil {
		return fmt.Errorf("getting kubeadmcontrolplane: %w", err)
	}
	if kcp.Spec.Version != spec {
		kcp.Spec.Version = spec
		if err := mgmt.Update(ctx, kcp); err != nil {
			return fmt.Errorf("updating kubeadmcontrolplane: %w", err)
		}
	}
	kcp.Status.Versions = nil
	for _, v := range versions {
		kcp.Status.Versions = append(kcp.Status.Versions, clusterv1.StatusVersion{Version: v.Version, Replicas: v.Replicas})
	}
	if err := mgmt.Status().Update(ctx, kcp); err != nil {
		return fmt.Errorf("updating kubeadmcontrolplane status: %w", err)
	}
	return nil
}

// GrantNamespaceRole binds user to a Role with verbs on placements in
// namespace.
func GrantNamespaceRole(ctx context.Context, mgmt client.Client, namespace, user string, verbs ...string) error {
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "placements-" + user, Namespace: namespace},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{schedulingv1alpha1.GroupName}, Resources: []string{"placements"}, Verbs: verbs}},
	}
	if err := mgmt.Create(ctx, role); err != nil {
		return fmt.Errorf("creating role: %w", err)
	}
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name, Namespace: namespace},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
	}
	if err := mgmt.Create(ctx, rb); err != nil {
		return fmt.Errorf("creating rolebinding: %w", err)
	}
	return nil
}
