// Package fleetupgrade reconciles FleetUpgrade objects: it moves the Cluster
// API (v1beta2) clusters a FleetUpgrade selects to the next Kubernetes minor
// version, canary first, then the waves, the management cluster last, one
// KubeadmControlPlane machine at a time, and stops the rollout when the
// Mixed Version Proxy verifier sees a tenant request fail.
//
// It owns the FleetUpgrade's status (phase, conditions, one entry per
// cluster with a step per machine replaced) and writes three things in the
// workload clusters' Cluster API objects: the KubeadmControlPlane's
// apiServer extraArgs (the wire-MVP step, preflight.WireMVPPatch), its
// spec.version (the version bump), the deletion hook GateHook on every
// control-plane Machine (gate.go: a Machine KubeadmControlPlane marks for
// deletion goes only once the verifier passed on every apiserver), and,
// for spec.abort only, the Cluster's spec.paused. A Cluster it paused
// carries the annotation PausedByAnnotation; it never clears a pause it
// did not set.
//
// With LoadBalancers set it also hands control-plane servers off between a
// Hetzner API load balancer and Cluster API (handoff.go): it puts the
// pre-drain deletion hook HandoffHook on the control-plane Machines of the
// clusters it upgrades, removes a Machine's server from the load balancer
// (internal/hetzner) when Cluster API starts deleting the Machine and only
// then removes the hook, and adds each new Machine's server before the
// verifier round that lets the rollout go on. The hook comes off again
// when the cluster is done, aborted, or the FleetUpgrade deleted.
//
// What it needs from elsewhere comes through small interfaces: the plan
// (internal/upgrade/plan) and preflight (internal/upgrade/preflight)
// packages are called directly; the verifier (Verifier, required:
// RunVerifier runs internal/upgrade/verify.Run on the apiservers Targets
// finds, and ManagementRunVerifier, for the management cluster, also
// probes the platform's own APIs), the construction of a workload cluster's
// rest.Config from its kubeconfig Secret (RESTConfigFunc, DefaultRESTConfig
// when unset), the upgrade records (Records, implemented by *store.Store),
// the surge capacity (preflight.Capacity) and the load balancers
// (LoadBalancerFunc, HetznerLoadBalancers in production) are injected.
//
// A reconcile runs the phases of phases.go over the scope of scope.go:
// plan, abort, then the stages, each cluster moved on by the steps of
// cluster.go (preflight, wire MVP, bump, machine by machine behind the
// verifier's gate in verify.go and gate.go). conditions.go computes the status from
// the scope, records.go writes the records and events. Docs:
// docs/upgrades.md, "How the controller runs a FleetUpgrade".
package fleetupgrade
