// Package kube is the runtime driver for workload clusters: it runs each
// process type of a release as a Deployment in the tenant's namespace, with
// a Service in front of the web process and a PodDisruptionBudget for every
// process with more than one replica, all applied server-side under the
// field manager "bex".
//
// It owns those objects (labelled app.kubernetes.io/managed-by=bex and
// bex.co/app) and nothing else in the cluster; the App controller hands it
// the cluster's rest.Config. Readiness comes from the release's health check
// as a readinessProbe, rollouts are RollingUpdates that never go below the
// wanted replicas (maxUnavailable 0, maxSurge 1), and Status is read back
// from the Deployments and their Pods. A process's Restart is the pod
// template's bex.co/restart annotation: a new one rolls the Deployment, an
// empty one keeps the annotation the release's Deployment has.
//
// Tenants are hostile, so the driver also keeps what confines them:
//   - a release's environment is a Secret of its own ("<app>-env-<n>"),
//     which the containers read with envFrom; the pod spec carries no config
//     value. The Secret of the release before stays until the new one has
//     rolled out, a failed release's goes with it, and Remove deletes all;
//   - the tenant's namespace is labelled for Pod Security admission to
//     enforce the restricted profile, and the pods satisfy it (non-root
//     AppUser, RuntimeDefault seccomp, no privilege escalation, no
//     capabilities, no service account token);
//   - the namespace has a NetworkPolicy (TenantPolicyName) that denies all
//     traffic but DNS and what Options.Network allows, and one for build
//     Pods (BuildPolicyName) with what Options.Network.Builds allows them
//     besides.
//
// PrepareNamespace applies the last two; Deploy calls it every time.
//
// Besides apps, the driver runs Pods of its own in a tenant's namespace:
// one-off runs and release phases (Run, run.go), and a build's Pod
// (StartBuild, build.go), whose agent runs the build's steps for the
// builder (builder/buildpod) — both under the same confinement.
package kube
