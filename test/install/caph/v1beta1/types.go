package v1beta1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// HetznerCluster is the Hetzner Cloud side of a Cluster API cluster: its
// regions, its API load balancer, its private network, placement groups, the
// SSH keys of its servers and the Secret with the API token.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=hetznerclusters,scope=Namespaced,categories=cluster-api
type HetznerCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec HetznerClusterSpec `json:"spec,omitempty"`
}

// HetznerClusterSpec is the part of CAPH's HetznerClusterSpec the template
// sets.
type HetznerClusterSpec struct {
	// ControlPlaneRegions are the regions of the control-plane servers.
	// +kubebuilder:validation:MinItems=1
	ControlPlaneRegions []Region `json:"controlPlaneRegions"`

	// ControlPlaneEndpoint is the API endpoint; CAPH fills in the load
	// balancer's address.
	// +optional
	ControlPlaneEndpoint *APIEndpoint `json:"controlPlaneEndpoint,omitempty"`

	// ControlPlaneLoadBalancer is the load balancer in front of the
	// control-plane servers' apiservers.
	// +optional
	ControlPlaneLoadBalancer *LoadBalancerSpec `json:"controlPlaneLoadBalancer,omitempty"`

	// HCloudNetwork is the cluster's private network.
	// +optional
	HCloudNetwork *HCloudNetworkSpec `json:"hcloudNetwork,omitempty"`

	// HCloudPlacementGroups are the placement groups machines may name.
	// +optional
	HCloudPlacementGroups []HCloudPlacementGroupSpec `json:"hcloudPlacementGroups,omitempty"`

	// SSHKeys are the keys put on every server.
	SSHKeys HetznerSSHKeys `json:"sshKeys"`

	// HetznerSecretRef names the Secret that holds the Hetzner API token.
	HetznerSecretRef HetznerSecretRef `json:"hetznerSecretRef"`
}

// Region is a Hetzner Cloud location.
// +kubebuilder:validation:Enum=fsn1;hel1;nbg1;ash;hil;sin
type Region string

// APIEndpoint is a host and port.
type APIEndpoint struct {
	// +kubebuilder:validation:MaxLength=512
	Host string `json:"host"`
	Port int32  `json:"port"`
}

// LoadBalancerSpec is the control plane's load balancer.
type LoadBalancerSpec struct {
	// Enabled creates the load balancer.
	// +kubebuilder:default=true
	// +optional
	Enabled bool `json:"enabled"`

	// Name of the load balancer; CAPH picks one when empty.
	// +optional
	Name *string `json:"name,omitempty"`

	// Region of the load balancer.
	// +optional
	Region Region `json:"region,omitempty"`

	// Type is the load balancer's size.
	// +kubebuilder:validation:Enum=lb11;lb21;lb31
	// +kubebuilder:default=lb11
	// +optional
	Type string `json:"type,omitempty"`

	// Port the load balancer listens on for the API.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +kubebuilder:default=6443
	// +optional
	Port int `json:"port,omitempty"`
}

// HCloudNetworkSpec is a private network.
type HCloudNetworkSpec struct {
	// Enabled creates the network.
	Enabled bool `json:"enabled"`

	// NetworkZone is the network's zone; it must hold the regions.
	// +kubebuilder:validation:Enum=eu-central;us-east;us-west;ap-southeast
	// +kubebuilder:default=eu-central
	// +optional
	NetworkZone string `json:"networkZone,omitempty"`

	// CIDRBlock is the network's range.
	// +kubebuilder:default="10.0.0.0/16"
	// +optional
	CIDRBlock string `json:"cidrBlock,omitempty"`

	// SubnetCIDRBlock is the servers' subnet in it.
	// +kubebuilder:default="10.0.0.0/24"
	// +optional
	SubnetCIDRBlock string `json:"subnetCidrBlock,omitempty"`
}

// HCloudPlacementGroupSpec is a placement group.
type HCloudPlacementGroupSpec struct {
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`

	// Type spread puts the group's servers on different hosts.
	// +kubebuilder:validation:Enum=spread
	// +kubebuilder:default=spread
	// +optional
	Type string `json:"type,omitempty"`
}

// HetznerSSHKeys are the SSH keys of the cluster's servers.
type HetznerSSHKeys struct {
	// HCloud keys, by their name in the Hetzner project.
	// +optional
	HCloud []SSHKey `json:"hcloud,omitempty"`
}

// SSHKey names a key in the Hetzner project.
type SSHKey struct {
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// +optional
	Fingerprint string `json:"fingerprint,omitempty"`
}

// HetznerSecretRef names the Secret with the Hetzner credentials and the keys
// in it.
type HetznerSecretRef struct {
	// +kubebuilder:default=hetzner
	Name string `json:"name"`

	Key HetznerSecretKeyRef `json:"key"`
}

// HetznerSecretKeyRef are the keys of the Secret.
type HetznerSecretKeyRef struct {
	// HCloudToken is the key that holds the Hetzner Cloud API token.
	HCloudToken string `json:"hcloudToken"`
}

// HCloudMachineTemplate is the template of a MachineDeployment's or a
// KubeadmControlPlane's Hetzner Cloud servers.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=hcloudmachinetemplates,scope=Namespaced,categories=cluster-api
type HCloudMachineTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec HCloudMachineTemplateSpec `json:"spec,omitempty"`
}

// HCloudMachineTemplateSpec holds the server template.
type HCloudMachineTemplateSpec struct {
	Template HCloudMachineTemplateResource `json:"template"`
}

// HCloudMachineTemplateResource is one server's template.
type HCloudMachineTemplateResource struct {
	Spec HCloudMachineSpec `json:"spec"`
}

// HCloudMachineSpec is the part of CAPH's HCloudMachineSpec the template
// sets.
type HCloudMachineSpec struct {
	// Type is the server type, e.g. cpx31.
	Type string `json:"type"`

	// ImageName is the Hetzner image or snapshot the server boots.
	// +kubebuilder:validation:MinLength=1
	// +optional
	ImageName string `json:"imageName,omitempty"`

	// PlacementGroupName is one of the HetznerCluster's placement groups.
	// +optional
	PlacementGroupName *string `json:"placementGroupName,omitempty"`

	// SSHKeys replace the cluster's keys for these servers.
	// +optional
	SSHKeys []SSHKey `json:"sshKeys,omitempty"`
}
