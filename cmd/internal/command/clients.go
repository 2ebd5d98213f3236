package command

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"bex.co/bex/controllers"
	"bex.co/bex/internal/kubeconfig"
	"bex.co/bex/internal/store"
)

// Clients are the store and the management cluster's client every command
// opens first.
type Clients struct {
	Store *store.Store
	// Config reaches the management cluster.
	Config *rest.Config
	// Kube is an uncached client of the management cluster with the
	// controllers' scheme.
	Kube client.Client
}

// Open opens the store (migrating it) and a client of the management
// cluster (kubeconfig, else in-cluster). Close the store when done.
func Open(ctx context.Context, databaseURL, kubeconfigPath string) (*Clients, error) {
	cfg, err := kubeconfig.Load(kubeconfigPath, "management cluster")
	if err != nil {
		return nil, err
	}
	kube, err := client.New(cfg, client.Options{Scheme: controllers.NewScheme()})
	if err != nil {
		return nil, fmt.Errorf("creating a client: %w", err)
	}
	st, err := store.Open(ctx, databaseURL)
	if err != nil {
		return nil, fmt.Errorf("opening the store: %w", err)
	}
	return &Clients{Store: st, Config: cfg, Kube: kube}, nil
}

// KubeReady is a readiness check: the management cluster's apiserver
// answers a list.
func (c *Clients) KubeReady(ctx context.Context) error { return KubeAnswers(ctx, c.Kube) }

// KubeAnswers is a readiness check of a cluster: its apiserver answers a
// list of one namespace.
func KubeAnswers(ctx context.Context, kube client.Client) error {
	var nss corev1.NamespaceList
	if err := kube.List(ctx, &nss, client.Limit(1)); err != nil {
		return fmt.Errorf("kube-apiserver: %w", err)
	}
	return nil
}

// StoreReady is a readiness check: Postgres answers.
func (c *Clients) StoreReady(ctx context.Context) error { return c.Store.Pool().Ping(ctx) }
