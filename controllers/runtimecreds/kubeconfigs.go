package runtimecreds

import (
	"context"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"bex.co/bex/controllers/privatecache"
)

// kubeconfigSuffix ends the name of the Secret Cluster API writes a
// cluster's admin kubeconfig into.
const kubeconfigSuffix = "-kubeconfig"

// kubeconfigSource returns the source that brings a Cluster back as soon
// as its <cluster>-kubeconfig Secret is created, changed or deleted, and
// adds to mgr the cache it is read from. That cache is the reconciler's
// own, not the manager's (privatecache): it holds the metadata only (the
// Secret itself is read with Reader) of the Secrets Cluster API labels
// with their cluster's name (clusterv1.ClusterNameLabel, which Cluster API
// v1.14 sets on the kubeconfig, the certificate authorities and the
// machines' bootstrap data), of FleetNamespace when set. Its size follows
// the fleet, not the tenants' Secrets; a kubeconfig Secret without that
// label is found at the next Resync.
func (r *Reconciler) kubeconfigSource(mgr ctrl.Manager) (source.Source, error) {
	hasCluster, err := labels.NewRequirement(clusterv1.ClusterNameLabel, selection.Exists, nil)
	if err != nil {
		return nil, fmt.Errorf("selecting Cluster API's secrets: %w", err)
	}
	secret := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"}}
	src, err := privatecache.Kind(mgr, privatecache.Selector{
		Namespace: r.FleetNamespace,
		Labels:    labels.NewSelector().Add(*hasCluster),
	}, secret, handler.TypedEnqueueRequestsFromMapFunc(clusterOfKubeconfig))
	if err != nil {
		return nil, fmt.Errorf("watching the kubeconfig secrets: %w", err)
	}
	return src, nil
}

// clusterOfKubeconfig maps a <cluster>-kubeconfig Secret to its Cluster;
// Cluster API's other Secrets map to nothing.
func clusterOfKubeconfig(_ context.Context, s *metav1.PartialObjectMetadata) []reconcile.Request {
	name, ok := strings.CutSuffix(s.Name, kubeconfigSuffix)
	if !ok || name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: s.Namespace, Name: name}}}
}
