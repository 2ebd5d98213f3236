// Package runtime owns the contract between the platform and whatever runs
// tenant code: the Driver interface, the Release it rolls out, and the
// Status, Instance and LogLine it reports back.
//
// The App controller hands a Release to a Driver; the process driver
// (runtime/process) runs it as supervised OS processes in embedded mode, the
// kubernetes driver (runtime/kube) as Deployments in a workload cluster.
// runtime/runtimetest holds the suite every driver must pass. A driver
// that reads its instances' CPU and memory implements UsageReader (the
// process driver; the placed driver forwards it), which feeds the per-app
// series of internal/appmetrics. One that reads every instance it runs at
// once implements InstancesReader (the kube driver), which
// runtime/runtimemetrics reads at each scrape for the runtime's
// Prometheus metrics.
package runtime
