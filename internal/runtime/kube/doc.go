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
// from the Deployments and their Pods.
package kube
