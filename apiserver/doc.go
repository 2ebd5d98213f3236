// Package apiserver is bex-apiserver: the aggregated API server of the
// scheduling.bex.co group, built on k8s.io/apiserver the way
// sample-apiserver is. Options (bound to pflag) go Complete → Validate →
// Config → Run; Config builds a generic server with delegated authentication
// and authorization against the kube-apiserver (the front proxy's
// certificate verification cached by package frontproxy), storage in the
// kube-apiserver's etcd under its own prefix, and published OpenAPI; New
// installs three resources:
//
//   - clustercapacities (registry/clustercapacity): read-only, computed from
//     the fleet (internal/fleetstate) and the stored Placements;
//   - placementreviews (registry/placementreview): create-only answers of
//     the scheduler (scheduler);
//   - placements (registry/placement): namespaced and stored.
//
// Registering the server with a kube-apiserver (APIService, Service, RBAC)
// is package registration; running it inside embedded mode and tests is
// package local.
package apiserver
