package apiclient

import (
	"context"
	"net/http"
)

// LocalClusterNamespace is the namespace of every local cluster: the API
// names them by their name alone.
const LocalClusterNamespace = "default"

// CreateLocalClusterRequest asks for a cluster of the local fleet, whose
// machines are processes on the platform's machine (make run only).
type CreateLocalClusterRequest struct {
	// Name is the Cluster's name, a DNS label of at most 43 characters; the
	// cluster is made in the namespace default.
	Name string `json:"name"`
	// Version is a pinned Kubernetes version, such as v1.36.3.
	Version string `json:"version"`
	// ControlPlaneReplicas is the number of control-plane machines, 3 to 5;
	// zero means 3.
	ControlPlaneReplicas int32 `json:"controlPlaneReplicas,omitempty"`
	// WorkerReplicas is the number of worker machines, 0 to 4: each runs
	// bex-node, the node agent that runs Pods as runc containers.
	WorkerReplicas int32 `json:"workerReplicas,omitempty"`
}

// LocalCluster answers the creation of a local cluster: what was written.
type LocalCluster struct {
	// Name is the Cluster's "namespace/name".
	Name                 string `json:"name"`
	Version              string `json:"version"`
	ControlPlaneReplicas int32  `json:"controlPlaneReplicas"`
	WorkerReplicas       int32  `json:"workerReplicas"`
	// AddressBlock is the loopback /24 its processes listen in.
	AddressBlock string `json:"addressBlock"`
	// Endpoint is where its API will answer (the load balancer), host:port.
	Endpoint string `json:"endpoint"`
	// Message says what happens now and how to follow it.
	Message string `json:"message"`
}

// LocalClusterDeletion answers the deletion of a local cluster.
type LocalClusterDeletion struct {
	// Name is the Cluster's "namespace/name".
	Name string `json:"name"`
	// Unpaused is true when the Cluster was paused and the deletion
	// unpaused it, so that Cluster API deletes it.
	Unpaused bool `json:"unpaused,omitempty"`
	// Message says what happens now.
	Message string `json:"message"`
}

// CreateLocalCluster writes the objects of a local cluster (operator
// tokens only; a platform without a local fleet answers 501).
func (c *Client) CreateLocalCluster(ctx context.Context, req CreateLocalClusterRequest) (LocalCluster, error) {
	var lc LocalCluster
	return lc, c.call(ctx, http.MethodPost, "/fleet/local-clusters", nil, req, &lc)
}

// DeleteLocalCluster deletes a local cluster by name (operator tokens
// only); it is gone once its machines are.
func (c *Client) DeleteLocalCluster(ctx context.Context, name string) (LocalClusterDeletion, error) {
	var d LocalClusterDeletion
	return d, c.call(ctx, http.MethodDelete, "/fleet/local-clusters/"+seg(name), nil, nil, &d)
}
