// Command placebench counts what the App controller's placements cost
// with many Apps on a fleet (docs/perf.md, "10,000 apps"): it places
// --apps Apps over --tenants tenants on --clusters Cluster API clusters
// through bex-apiserver's scheduling API aggregated into a real
// kube-apiserver, then counts the controller's placement reconciles and
// its scheduling API requests over --window, once following the
// ClusterCapacities (the platform's default) and once polling every
// placement every 30 s (as while the capacities cannot be watched).
//
// It owns nothing the platform runs: it starts the control plane and
// bex-apiserver (apiserver/local), seeds the fleet (test/scheduler/fleettest,
// the workload clusters' Nodes in the same apiserver) and runs the App
// controller (controllers/app, SchedulerPlacer, no runtime) in its
// process.
package main
