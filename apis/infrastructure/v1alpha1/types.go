package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// Finalizers the controllers put on their objects, so that the processes
// and files of a cluster or machine go before the object does.
const (
	LocalClusterFinalizer = "infrastructure.bex.co/localcluster"
	LocalMachineFinalizer = "infrastructure.bex.co/localmachine"
)

// Kinds of the group, as Cluster API's references name them.
const (
	LocalClusterKind         = "LocalCluster"
	LocalMachineKind         = "LocalMachine"
	LocalMachineTemplateKind = "LocalMachineTemplate"
)

// IsLocalCluster reports whether ref, a Cluster's infrastructure
// reference, names a LocalCluster.
func IsLocalCluster(ref clusterv1.ContractVersionedObjectReference) bool {
	return ref.APIGroup == GroupVersion.Group && ref.Kind == LocalClusterKind
}

// ReadyCondition is the condition type the controllers set on both kinds:
// True once the cluster's etcd and load balancer run, or once the machine's
// kube-apiserver answers /readyz and serves behind the load balancer.
const ReadyCondition = "Ready"

// Reasons of the Ready condition.
const (
	// ReadyReason (True): everything runs.
	ReadyReason = "Ready"
	// WaitingForClusterReason (False): the object has no owning Cluster yet,
	// or the Cluster's infrastructure is not provisioned.
	WaitingForClusterReason = "WaitingForCluster"
	// WaitingForBootstrapDataReason (False, machine): the Machine has no
	// bootstrap data yet.
	WaitingForBootstrapDataReason = "WaitingForBootstrapData"
	// StartingReason (False): processes are starting.
	StartingReason = "Starting"
	// WaitingForPeersReason (False, machine): the kube-apiserver is ready but
	// not yet in the load balancer: its peers' discovery does not list what
	// it serves yet.
	WaitingForPeersReason = "WaitingForPeers"
	// FailedReason (False): the message says what failed.
	FailedReason = "Failed"
	// DeletingReason (False): the processes are being stopped.
	DeletingReason = "Deleting"
)

// ProviderIDPrefix starts every LocalMachine's providerID:
// bex-local:///<namespace>/<machine>.
const ProviderIDPrefix = "bex-local:///"

// LocalClusterSpec is where a cluster's processes listen.
//
// +kubebuilder:validation:XValidation:rule="has(self.plane) == has(oldSelf.plane)",message="plane cannot be added or removed"
type LocalClusterSpec struct {
	// AddressBlock is the loopback /24 the cluster's processes listen in,
	// such as 127.77.3.0/24: the control-plane load balancer at .1 (port
	// 6443), etcd at .2 (2379, peers 2380), the machines from .11 on (port
	// 6443; with Plane, the plane's load balancer's port). It must not be
	// shared with another cluster.
	// +kubebuilder:validation:Pattern=`^127\.([0-9]{1,3})\.([0-9]{1,3})\.0/24$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="addressBlock cannot be changed"
	AddressBlock string `json:"addressBlock"`

	// Plane, when set, names a running control plane that the cluster
	// takes over instead of starting an etcd and a load balancer of its
	// own: "management", the platform's own, which make run registers with
	// the provider. The machines then join that plane's load balancer
	// (listening on its port, each on its own address of AddressBlock) and
	// use its etcd, so that Cluster API manages the plane it runs on
	// (docs/fleet.md, "The management plane"). It cannot be changed.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="plane cannot be changed"
	Plane string `json:"plane,omitempty"`

	// ControlPlaneEndpoint is the cluster's API endpoint, the load
	// balancer. The controller sets it from AddressBlock (or from the
	// plane's load balancer); Cluster API copies it to the Cluster.
	// +optional
	ControlPlaneEndpoint clusterv1.APIEndpoint `json:"controlPlaneEndpoint,omitempty,omitzero"`
}

// LocalClusterInitializationStatus is the provider contract's
// initialization status.
type LocalClusterInitializationStatus struct {
	// Provisioned is true once etcd and the load balancer run and the etcd
	// Secrets Cluster API reads exist.
	// +optional
	Provisioned *bool `json:"provisioned,omitempty"`
}

// LocalClusterStatus is what the controller observed.
type LocalClusterStatus struct {
	// +optional
	Initialization LocalClusterInitializationStatus `json:"initialization,omitempty,omitzero"`
	// EtcdEndpoint is the client URL of the cluster's etcd.
	// +optional
	EtcdEndpoint string `json:"etcdEndpoint,omitempty"`
	// Backends are the kube-apiservers (host:port) the load balancer sends
	// connections to.
	// +optional
	// +listType=atomic
	Backends []string `json:"backends,omitempty"`
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// LocalCluster is the infrastructure of a Cluster API cluster whose
// machines are processes on this machine.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=cluster-api
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.metadata.labels['cluster\.x-k8s\.io/cluster-name']`
// +kubebuilder:printcolumn:name="Endpoint",type=string,JSONPath=`.spec.controlPlaneEndpoint.host`
// +kubebuilder:printcolumn:name="Provisioned",type=boolean,JSONPath=`.status.initialization.provisioned`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type LocalCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   LocalClusterSpec   `json:"spec"`
	Status LocalClusterStatus `json:"status,omitempty,omitzero"`
}

// LocalClusterList is a list of LocalClusters.
//
// +kubebuilder:object:root=true
type LocalClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []LocalCluster `json:"items"`
}

// LocalMachineSpec is a machine's identity.
type LocalMachineSpec struct {
	// ProviderID is bex-local:///<namespace>/<name>; the controller sets it
	// and the Node of the machine carries it.
	// +optional
	ProviderID string `json:"providerID,omitempty"`
}

// LocalMachineInitializationStatus is the provider contract's
// initialization status.
type LocalMachineInitializationStatus struct {
	// Provisioned is true once the machine's kube-apiserver has been
	// started and its Node registered.
	// +optional
	Provisioned *bool `json:"provisioned,omitempty"`
}

// LocalMachineStatus is what the controller observed.
type LocalMachineStatus struct {
	// +optional
	Initialization LocalMachineInitializationStatus `json:"initialization,omitempty,omitzero"`
	// Addresses are the machine's loopback address (InternalIP) and its
	// hostname. The address is chosen before the first start and kept.
	// +optional
	// +listType=atomic
	Addresses []clusterv1.MachineAddress `json:"addresses,omitempty"`
	// Version is the Kubernetes version the machine's kube-apiserver runs.
	// +optional
	Version string `json:"version,omitempty"`
	// Restarts counts the times the kube-apiserver was started again after
	// it exited, as the kubelet restarts a static pod.
	// +optional
	Restarts int32 `json:"restarts,omitempty"`
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// LocalMachine is a Cluster API machine that is processes on this machine:
// a control-plane machine's kube-apiserver, kube-controller-manager and
// kube-scheduler, or a worker's node agent, bex-node.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=cluster-api
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.metadata.labels['cluster\.x-k8s\.io/cluster-name']`
// +kubebuilder:printcolumn:name="Address",type=string,JSONPath=`.status.addresses[0].address`
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.status.version`
// +kubebuilder:printcolumn:name="Provisioned",type=boolean,JSONPath=`.status.initialization.provisioned`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type LocalMachine struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   LocalMachineSpec   `json:"spec,omitempty"`
	Status LocalMachineStatus `json:"status,omitempty,omitzero"`
}

// LocalMachineList is a list of LocalMachines.
//
// +kubebuilder:object:root=true
type LocalMachineList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []LocalMachine `json:"items"`
}

// LocalMachineTemplateResource is what a LocalMachine is cloned from.
type LocalMachineTemplateResource struct {
	// +optional
	ObjectMeta clusterv1.ObjectMeta `json:"metadata,omitempty,omitzero"`
	Spec       LocalMachineSpec     `json:"spec"`
}

// LocalMachineTemplateSpec holds the template.
type LocalMachineTemplateSpec struct {
	Template LocalMachineTemplateResource `json:"template"`
}

// LocalMachineTemplate is the template a KubeadmControlPlane or a
// MachineDeployment clones LocalMachines from.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:categories=cluster-api
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
type LocalMachineTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec LocalMachineTemplateSpec `json:"spec"`
}

// LocalMachineTemplateList is a list of LocalMachineTemplates.
//
// +kubebuilder:object:root=true
type LocalMachineTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []LocalMachineTemplate `json:"items"`
}
