// Package v1alpha1 holds the types of the platform.bex.co/v1alpha1 API: App
// (a tenant's service: where its code comes from, how it is built, which
// processes run and how many, its environment, health check and plan) and
// Route (a hostname served by an App's process, with its TLS mode).
//
// Both kinds are namespaced; the namespace is the tenant. Validation lives in
// the schema and in CEL rules so that the API server refuses a bad spec with a
// message that names the field. The App and Route controllers own the status
// and report progress as the conditions documented here. Nothing in this
// package talks to a cluster.
//
// +kubebuilder:object:generate=true
// +groupName=platform.bex.co
package v1alpha1
