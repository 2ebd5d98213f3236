package scheduling

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Capacity is an amount of the resources a node pool offers or its
// placements request.
type Capacity struct {
	// CPU in cores.
	CPU resource.Quantity `json:"cpu"`
	// Memory in bytes.
	Memory resource.Quantity `json:"memory"`
	// Pods is a number of pods.
	Pods int64 `json:"pods"`
}

// Resources is the CPU and memory of one replica.
type Resources struct {
	// CPU of one replica, such as 500m.
	CPU resource.Quantity `json:"cpu,omitempty"`
	// Memory of one replica, such as 512Mi.
	Memory resource.Quantity `json:"memory,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// ClusterCapacity is a read-only view of one workload cluster of the fleet,
// computed when it is read: per node pool, what its nodes can hold and what
// the Placements on it request, the Kubernetes versions its control plane
// runs, and whether it takes new placements. Its name is the Cluster API
// Cluster's name (or a static cluster's, such as "local").
type ClusterCapacity struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Status is what bex-apiserver observed.
	Status ClusterCapacityStatus `json:"status"`
}

// ClusterCapacityStatus is the observed capacity of a cluster.
type ClusterCapacityStatus struct {
	// Source is where the cluster comes from: ClusterAPI or Static.
	Source string `json:"source"`
	// ClusterNamespace is the namespace of the Cluster API Cluster.
	ClusterNamespace string `json:"clusterNamespace,omitempty"`
	// Region of the cluster, from the label topology.kubernetes.io/region.
	Region string `json:"region,omitempty"`
	// Plans the cluster hosts; empty means every plan.
	Plans []string `json:"plans,omitempty"`
	// ControlPlaneVersions are the Kubernetes versions the control plane's
	// machines run, sorted, from KubeadmControlPlane status.versions.
	ControlPlaneVersions []string `json:"controlPlaneVersions,omitempty"`
	// MidUpgrade is true while the control plane runs more than one version,
	// is rolling out, or has a spec.version it does not run yet.
	MidUpgrade bool `json:"midUpgrade"`
	// Healthy is true when the Cluster is Available and its nodes were read.
	Healthy bool `json:"healthy"`
	// Cordoned is true when the Cluster has the annotation
	// scheduling.bex.co/cordoned=true.
	Cordoned bool `json:"cordoned,omitempty"`
	// Deleting is true when the Cluster API Cluster is being deleted.
	Deleting bool `json:"deleting,omitempty"`
	// Standby is true for a standby static cluster: it takes new placements
	// only while no Cluster API cluster of the fleet can run apps.
	Standby bool `json:"standby,omitempty"`
	// AcceptsPlacements is true when the scheduler may place new apps here.
	AcceptsPlacements bool `json:"acceptsPlacements"`
	// Reason is Accepting, or why the cluster takes no new placements.
	Reason string `json:"reason"`
	// Message explains Reason to a person.
	Message string `json:"message,omitempty"`
	// Allocatable is the sum of the pools' allocatable resources.
	Allocatable Capacity `json:"allocatable"`
	// Requested is the sum of what the cluster's Placements request.
	Requested Capacity `json:"requested"`
	// Pools are the cluster's node pools (Cluster API MachineDeployments),
	// sorted by name.
	Pools []PoolCapacity `json:"pools,omitempty"`
}

// PoolCapacity is the capacity of one node pool.
type PoolCapacity struct {
	// Name of the pool: the MachineDeployment's name.
	Name string `json:"name"`
	// Nodes is the number of the pool's nodes.
	Nodes int32 `json:"nodes"`
	// ReadyNodes is the number of the pool's nodes that are Ready; only they
	// count in Allocatable.
	ReadyNodes int32 `json:"readyNodes"`
	// NotReadySince, when the pool has nodes and none is Ready, is since
	// when none has been: the last time one of them left Ready.
	NotReadySince *metav1.Time `json:"notReadySince,omitempty"`
	// Allocatable is the sum of the ready nodes' status.allocatable.
	Allocatable Capacity `json:"allocatable"`
	// Requested is the sum of replicas × resources of the Placements on
	// this pool; Pods is the sum of their replicas.
	Requested Capacity `json:"requested"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// ClusterCapacityList is a list of ClusterCapacity, sorted by name.
type ClusterCapacityList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []ClusterCapacity `json:"items"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// PlacementReview asks where an app would go, and why. Like
// SubjectAccessReview it is only created, never stored: the answer comes
// back in status. It changes nothing; the App controller records its
// choice as a Placement.
type PlacementReview struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the app to place.
	Spec PlacementReviewSpec `json:"spec"`

	// Status is the scheduler's answer.
	Status PlacementReviewStatus `json:"status,omitempty"`
}

// PlacementReviewSpec describes an app to place.
type PlacementReviewSpec struct {
	// App names the app, for the record; it does not change the answer.
	App string `json:"app,omitempty"`
	// Replicas is the number of replicas to place; all go to one pool.
	// Defaults to 1.
	Replicas int32 `json:"replicas,omitempty"`
	// Resources of one replica. Zero CPU or memory take the plan's size.
	Resources Resources `json:"resources,omitempty"`
	// Constraints restrict the candidates.
	Constraints PlacementConstraints `json:"constraints,omitempty"`
	// Candidates is All (the default) or None: which candidates the
	// status lists.
	Candidates string `json:"candidates,omitempty"`
	// Reserve names the Placement the caller will write with the answer;
	// the chosen pool's room is held for it until it is seen changed or
	// the reservation expires. Nil for a review that only asks.
	Reserve *PlacementRef `json:"reserve,omitempty"`
}

// PlacementRef names a Placement.
type PlacementRef struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

// PlacementConstraints restrict where an app may go. Empty fields do not
// restrict.
type PlacementConstraints struct {
	// Region the cluster must be in.
	Region string `json:"region,omitempty"`
	// Pool the app must run in.
	Pool string `json:"pool,omitempty"`
	// Plan of the tenant: starter, standard or pro. The cluster must host it.
	Plan string `json:"plan,omitempty"`
}

// PlacementReviewStatus is the scheduler's answer.
type PlacementReviewStatus struct {
	// Schedulable is true when a pool was chosen.
	Schedulable bool `json:"schedulable"`
	// Cluster is the chosen cluster.
	Cluster string `json:"cluster,omitempty"`
	// Pool is the chosen pool.
	Pool string `json:"pool,omitempty"`
	// Score of the chosen pool, 0 to 100; higher is better.
	Score int32 `json:"score,omitempty"`
	// Strategy that scored the candidates: BinPack or Spread.
	Strategy string `json:"strategy"`
	// Resources of one replica, after the plan's defaults.
	Resources Resources `json:"resources"`
	// Message sums up the answer for a person.
	Message string `json:"message"`
	// Candidates lists every cluster and pool considered, sorted by cluster
	// then pool, with the verdict on each. A cluster rejected as a whole
	// (unhealthy, mid-upgrade, …) appears once, without a pool.
	Candidates []Candidate `json:"candidates,omitempty"`
}

// Candidate is the verdict on one cluster or pool.
type Candidate struct {
	// Cluster considered.
	Cluster string `json:"cluster"`
	// Pool considered; empty when the whole cluster was rejected.
	Pool string `json:"pool,omitempty"`
	// Feasible is true when the app fits here.
	Feasible bool `json:"feasible"`
	// Score, 0 to 100, of a feasible candidate.
	Score int32 `json:"score,omitempty"`
	// Reason is Chosen, LowerScore or why the candidate was rejected.
	Reason string `json:"reason"`
	// Message explains Reason with the figures.
	Message string `json:"message"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// Placement binds an app to a workload cluster and pool. The App
// controller writes one per app after a PlacementReview; the Placements on a
// pool are what its ClusterCapacity counts as requested. Its namespace is
// the tenant's.
type Placement struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the binding.
	Spec PlacementSpec `json:"spec"`
}

// PlacementSpec is the binding of an app to a cluster and pool.
type PlacementSpec struct {
	// App is the name of the App in the Placement's namespace.
	App string `json:"app"`
	// Cluster is the workload cluster's name (a ClusterCapacity name).
	Cluster string `json:"cluster"`
	// Pool is the node pool in the cluster.
	Pool string `json:"pool"`
	// Plan of the app, for the record.
	Plan string `json:"plan,omitempty"`
	// Replicas placed.
	Replicas int32 `json:"replicas"`
	// Resources of one replica.
	Resources Resources `json:"resources"`
	// MovedFrom records the last move of the app: where it was placed
	// before and why it left. Nil until the app first moves.
	MovedFrom *PlacementMove `json:"movedFrom,omitempty"`
}

// PlacementMove is where a Placement pointed before a move, and why it
// moved.
type PlacementMove struct {
	// Cluster the app was placed on.
	Cluster string `json:"cluster"`
	// Pool the app was placed in.
	Pool string `json:"pool"`
	// Reason the app left: ClusterGone, Deleting, Cordoned, MidUpgrade or
	// OverCommitted.
	Reason string `json:"reason"`
	// Message explains Reason to a person.
	Message string `json:"message,omitempty"`
	// Time of the move.
	Time metav1.Time `json:"time"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// PlacementList is a list of Placements.
type PlacementList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []Placement `json:"items"`
}
