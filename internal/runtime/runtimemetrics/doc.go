// Package runtimemetrics owns the runtime's Prometheus metrics, the same
// families for every driver: bex_runtime_instances{driver,state}, the
// instances of every app by state, and bex_runtime_restarts_total{driver},
// their restarts in place after a crash. NewDescs gives a driver that
// counts its restarts as they happen (the process driver) the families'
// descriptions; Collector makes them of what a runtime.InstancesReader
// reads at each scrape (the kube driver, the placed driver's kube
// clusters), counting each instance's restarts once from the restart
// counts it reads. The caller registers what it gets where its process
// serves /metrics (docs/metrics.md).
package runtimemetrics
