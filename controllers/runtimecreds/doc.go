// Package runtimecreds gives the platform's processes credentials of their
// own on each workload cluster of the fleet, in place of Cluster API's
// admin kubeconfigs.
//
// For each Cluster API Cluster (of the fleet namespace, when one is set)
// whose <cluster>-kubeconfig Secret exists and whose apiserver answers, the
// Reconciler, as that cluster's admin, keeps there the namespace Namespace
// with the ServiceAccount ServiceAccount, bound cluster-wide to the
// ClusterRole ClusterRoleName (ClusterRules: reading namespaces, the apps'
// Deployments, Pods, Services and EndpointSlices everywhere, the nodes'
// stats summaries) and, in each tenant namespace only, to TenantRoleName
// (TenantRules: the objects the kube driver writes there). It prepares the
// tenant namespaces itself (the kube driver's PrepareNamespace: Pod
// Security labels, NetworkPolicies and that RoleBinding), since the
// ServiceAccount may neither label namespaces nor bind roles: on each
// cluster, those of the tenants with an App placed there (status.cluster),
// as soon as one is placed there; a cluster holds no namespace, role or
// policy of a tenant whose apps all run elsewhere. It mints the ServiceAccount a token with the TokenRequest
// API (Lifetime, renewed once a third of it is left) and writes a
// kubeconfig of it, with the admin kubeconfig's server and CA, into one
// Secret of the platform's namespace (Secret), under the key
// placed.RuntimeKubeconfigKey(namespace, cluster); placed.KubeClusters
// reads it there (KubeOptions.RuntimeSecret). A Cluster's key goes with
// the Cluster. The Secret holds corev1.MaxSecretSize (1 MiB) of kubeconfigs,
// 1.7 KB each with an ECDSA CA (611 clusters), about 2.7 KB with an
// RSA-2048 one (some 380): a key that would not fit is refused with a
// Warning event on its Cluster.
//
// A Cluster whose kubeconfig Secret is not there yet is looked at again
// as soon as the Secret is created: the Reconciler watches, in a cache of
// its own, the metadata of the Secrets Cluster API labels with a cluster's
// name (cluster.x-k8s.io/cluster-name), not every Secret of the management
// cluster; a kubeconfig Secret without that label is found at the next
// Resync.
//
// One cluster's failure (no kubeconfig yet, an apiserver that does not
// answer) is an event on its Cluster and a retry of that cluster only.
package runtimecreds
