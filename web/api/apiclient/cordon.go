package apiclient

import (
	"context"
	"fmt"
	"net/http"
)

// ClusterCordon answers a cordon or an uncordon of a cluster of the fleet.
type ClusterCordon struct {
	// Name is the Cluster's "namespace/name".
	Name string `json:"name"`
	// Cordoned is whether the cluster is cordoned now.
	Cordoned bool `json:"cordoned"`
	// Changed is false when the cluster was so already.
	Changed bool `json:"changed"`
	// Message says what happens now.
	Message string `json:"message"`
}

// Notice says what the cordon or uncordon did, as bex and the console
// show it: "Cluster NS/NAME " and the Message when it changed the
// cluster, else that the cluster was so already.
func (cc ClusterCordon) Notice() string {
	switch {
	case cc.Changed:
		return fmt.Sprintf("Cluster %s %s.", cc.Name, cc.Message)
	case cc.Cordoned:
		return fmt.Sprintf("Cluster %s was cordoned already: nothing changed.", cc.Name)
	}
	return fmt.Sprintf("Cluster %s was not cordoned: nothing changed.", cc.Name)
}

// CordonCluster cordons the Cluster API cluster namespace/name: the
// scheduler places no app on it, and the App controller moves the apps it
// runs to other clusters. A cluster cordoned already is left as it is
// (operator tokens only).
func (c *Client) CordonCluster(ctx context.Context, namespace, name string) (ClusterCordon, error) {
	var cc ClusterCordon
	return cc, c.call(ctx, http.MethodPut, cordonPath(namespace, name), nil, nil, &cc)
}

// UncordonCluster lets the scheduler place apps on the Cluster API
// cluster namespace/name again; the apps moved off it stay where they
// are (operator tokens only).
func (c *Client) UncordonCluster(ctx context.Context, namespace, name string) (ClusterCordon, error) {
	var cc ClusterCordon
	return cc, c.call(ctx, http.MethodDelete, cordonPath(namespace, name), nil, nil, &cc)
}

func cordonPath(namespace, name string) string {
	return "/fleet/clusters/" + seg(namespace) + "/" + seg(name) + "/cordon"
}
