package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Reasons of ClusterCapacity.status.reason and of
// PlacementReview.status.candidates[].reason. Each names why a cluster or a
// pool takes, or does not take, a placement.
const (
	// ReasonAccepting: the cluster takes new placements.
	ReasonAccepting = "Accepting"
	// ReasonChosen: the candidate the review chose.
	ReasonChosen = "Chosen"
	// ReasonLowerScore: the candidate fits but scored lower than the chosen
	// one (or tied and comes later by name).
	ReasonLowerScore = "LowerScore"
	// ReasonUnhealthy: the cluster is not Available, or its nodes cannot be
	// read through its kubeconfig.
	ReasonUnhealthy = "Unhealthy"
	// ReasonMidUpgrade: the cluster's control plane runs more than one
	// Kubernetes version or is rolling out; it takes no new placements.
	ReasonMidUpgrade = "MidUpgrade"
	// ReasonCordoned: the operator set the annotation
	// scheduling.bex.co/cordoned=true on the cluster.
	ReasonCordoned = "Cordoned"
	// ReasonDeleting: the Cluster API Cluster is being deleted (it has a
	// deletion timestamp); it takes no new placements and its apps move.
	ReasonDeleting = "Deleting"
	// ReasonStandby: a standby static cluster (embedded mode's process
	// runtime) while some Cluster API cluster of the fleet can run apps (has
	// a pool with a ready node and is not being deleted); the message names
	// those clusters. Apps placed on it stay.
	ReasonStandby = "Standby"
	// ReasonRegionMismatch: the cluster is not in the requested region.
	ReasonRegionMismatch = "RegionMismatch"
	// ReasonPoolMismatch: the pool is not the requested pool.
	ReasonPoolMismatch = "PoolMismatch"
	// ReasonPlanNotOffered: the cluster does not host the tenant's plan.
	ReasonPlanNotOffered = "PlanNotOffered"
	// ReasonNoPools: the cluster has no node pool with ready nodes.
	ReasonNoPools = "NoPools"
	// ReasonInsufficientCPU: the pool's free CPU is less than asked.
	ReasonInsufficientCPU = "InsufficientCPU"
	// ReasonInsufficientMemory: the pool's free memory is less than asked.
	ReasonInsufficientMemory = "InsufficientMemory"
	// ReasonInsufficientPods: the pool's free pod slots are fewer than the
	// replicas.
	ReasonInsufficientPods = "InsufficientPods"
)

// Reasons of Placement spec.movedFrom.reason, besides ReasonDeleting,
// ReasonCordoned and ReasonMidUpgrade: why the App controller moved an app
// off its cluster.
const (
	// ReasonClusterGone: the cluster is no longer in the fleet (no
	// ClusterCapacity of that name).
	ReasonClusterGone = "ClusterGone"
	// ReasonOverCommitted: the pool can no longer hold what its Placements
	// request (requested > allocatable on CPU, memory or pods, or the pool
	// is gone), counting the app at its current size.
	ReasonOverCommitted = "OverCommitted"
	// ReasonNotReady is the reason of spec.movedFrom when the App's pool
	// has had no Ready node for longer than a grace period.
	ReasonNotReady = "NotReady"
)

// Annotations and labels bex-apiserver reads on Cluster API Clusters.
const (
	// RegionLabel on a Cluster names its region.
	RegionLabel = "topology.kubernetes.io/region"
	// PlansAnnotation on a Cluster lists the plans it hosts, comma separated;
	// absent means every plan.
	PlansAnnotation = "scheduling.bex.co/plans"
	// CordonedAnnotation "true" on a Cluster stops new placements onto it.
	CordonedAnnotation = "scheduling.bex.co/cordoned"
)

// What a PlacementReview's spec.candidates asks the status to list.
const (
	// CandidatesAll lists every cluster and pool considered.
	CandidatesAll = "All"
	// CandidatesNone lists none: the verdict and its message alone.
	CandidatesNone = "None"
)

// Strategies of scoring, chosen by bex-apiserver's --scoring flag.
const (
	// StrategyBinPack prefers the feasible pool with the least room left
	// after the placement.
	StrategyBinPack = "BinPack"
	// StrategySpread prefers the feasible pool with the most room left after
	// the placement.
	StrategySpread = "Spread"
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
	// +optional
	CPU resource.Quantity `json:"cpu,omitempty"`
	// Memory of one replica, such as 512Mi.
	// +optional
	Memory resource.Quantity `json:"memory,omitempty"`
}

// +genclient
// +genclient:nonNamespaced
// +genclient:onlyVerbs=get,list
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
	// +optional
	ClusterNamespace string `json:"clusterNamespace,omitempty"`
	// Region of the cluster, from the label topology.kubernetes.io/region.
	// +optional
	Region string `json:"region,omitempty"`
	// Plans the cluster hosts; empty means every plan.
	// +optional
	// +listType=set
	Plans []string `json:"plans,omitempty"`
	// ControlPlaneVersions are the Kubernetes versions the control plane's
	// machines run, sorted, from KubeadmControlPlane status.versions.
	// +optional
	// +listType=set
	ControlPlaneVersions []string `json:"controlPlaneVersions,omitempty"`
	// MidUpgrade is true while the control plane runs more than one version,
	// is rolling out, or has a spec.version it does not run yet.
	MidUpgrade bool `json:"midUpgrade"`
	// Healthy is true when the Cluster is Available and its nodes were read.
	Healthy bool `json:"healthy"`
	// Cordoned is true when the Cluster has the annotation
	// scheduling.bex.co/cordoned=true.
	// +optional
	Cordoned bool `json:"cordoned,omitempty"`
	// Deleting is true when the Cluster API Cluster is being deleted.
	// +optional
	Deleting bool `json:"deleting,omitempty"`
	// Standby is true for a standby static cluster: it takes new placements
	// only while no Cluster API cluster of the fleet can run apps.
	// +optional
	Standby bool `json:"standby,omitempty"`
	// AcceptsPlacements is true when the scheduler may place new apps here.
	AcceptsPlacements bool `json:"acceptsPlacements"`
	// Reason is Accepting, or why the cluster takes no new placements.
	Reason string `json:"reason"`
	// Message explains Reason to a person.
	// +optional
	Message string `json:"message,omitempty"`
	// Allocatable is the sum of the pools' allocatable resources.
	Allocatable Capacity `json:"allocatable"`
	// Requested is the sum of what the cluster's Placements request.
	Requested Capacity `json:"requested"`
	// Pools are the cluster's node pools (Cluster API MachineDeployments),
	// sorted by name.
	// +optional
	// +listType=map
	// +listMapKey=name
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

// +genclient
// +genclient:nonNamespaced
// +genclient:onlyVerbs=create
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
	// +optional
	Status PlacementReviewStatus `json:"status,omitempty"`
}

// PlacementReviewSpec describes an app to place.
type PlacementReviewSpec struct {
	// App names the app, for the record; it does not change the answer.
	// +optional
	App string `json:"app,omitempty"`
	// Replicas is the number of replicas to place; all go to one pool.
	// Defaults to 1.
	// +optional
	Replicas int32 `json:"replicas,omitempty"`
	// Resources of one replica. Zero CPU or memory take the plan's size.
	// +optional
	Resources Resources `json:"resources,omitempty"`
	// Constraints restrict the candidates.
	// +optional
	Constraints PlacementConstraints `json:"constraints,omitempty"`
	// Candidates says which candidates the status lists: All, the
	// default, lists every cluster and pool considered with why it was
	// chosen or not; None lists none, for a client that wants the verdict
	// alone (the App controller): over a fleet of hundreds of pools the
	// list is most of the answer. An unschedulable review's message
	// explains every rejection either way.
	// +optional
	Candidates string `json:"candidates,omitempty"`
	// Reserve names the Placement the caller will write with the answer
	// (the App controller: the App's Placement, in its tenant's
	// namespace). When set and the review is schedulable, bex-apiserver
	// holds the chosen pool's room for that Placement, and the reviews
	// that follow count it, until the Placement is seen changed (created,
	// updated or deleted) or 30 s have passed; a later reserving review
	// for the same Placement replaces it. A review that only asks
	// (kubectl, the bex CLI, Fits, a dry run) leaves it empty and changes
	// nothing.
	// +optional
	Reserve *PlacementRef `json:"reserve,omitempty"`
}

// PlacementRef names a Placement.
type PlacementRef struct {
	// Namespace of the Placement: the tenant's.
	Namespace string `json:"namespace"`
	// Name of the Placement: the App's.
	Name string `json:"name"`
}

// PlacementConstraints restrict where an app may go. Empty fields do not
// restrict.
type PlacementConstraints struct {
	// Region the cluster must be in.
	// +optional
	Region string `json:"region,omitempty"`
	// Pool the app must run in.
	// +optional
	Pool string `json:"pool,omitempty"`
	// Plan of the tenant: starter, standard or pro. The cluster must host it.
	// +optional
	Plan string `json:"plan,omitempty"`
}

// PlacementReviewStatus is the scheduler's answer.
type PlacementReviewStatus struct {
	// Schedulable is true when a pool was chosen.
	Schedulable bool `json:"schedulable"`
	// Cluster is the chosen cluster.
	// +optional
	Cluster string `json:"cluster,omitempty"`
	// Pool is the chosen pool.
	// +optional
	Pool string `json:"pool,omitempty"`
	// Score of the chosen pool, 0 to 100; higher is better.
	// +optional
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
	// +optional
	// +listType=atomic
	Candidates []Candidate `json:"candidates,omitempty"`
}

// Candidate is the verdict on one cluster or pool.
type Candidate struct {
	// Cluster considered.
	Cluster string `json:"cluster"`
	// Pool considered; empty when the whole cluster was rejected.
	// +optional
	Pool string `json:"pool,omitempty"`
	// Feasible is true when the app fits here.
	Feasible bool `json:"feasible"`
	// Score, 0 to 100, of a feasible candidate.
	// +optional
	Score int32 `json:"score,omitempty"`
	// Reason is Chosen, LowerScore or why the candidate was rejected.
	Reason string `json:"reason"`
	// Message explains Reason with the figures.
	Message string `json:"message"`
}

// +genclient
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
	// +optional
	Plan string `json:"plan,omitempty"`
	// Replicas placed.
	Replicas int32 `json:"replicas"`
	// Resources of one replica.
	Resources Resources `json:"resources"`
	// MovedFrom records the last move of the app: where it was placed
	// before and why it left. Empty until the app first moves.
	// +optional
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
	// +optional
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
