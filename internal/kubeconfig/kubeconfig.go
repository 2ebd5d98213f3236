package kubeconfig

import (
	"fmt"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Load reads the kubeconfig at path, or the in-cluster configuration when
// path is empty. what names the cluster in errors ("management cluster").
func Load(path, what string) (*rest.Config, error) {
	if path == "" {
		cfg, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("no kubeconfig for the %s and not in a cluster: %w", what, err)
		}
		return cfg, nil
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig %s of the %s: %w", path, what, err)
	}
	return cfg, nil
}
