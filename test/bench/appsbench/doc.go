// Command appsbench measures the platform with many apps: it seeds Apps,
// their releases and Routes over many tenants into a real control plane
// and Postgres, then times the App and Route controllers' convergence from
// cold and the requests it took, the API's app list, the edge's routing
// table and its added latency, and the memory each app costs: the
// platform process's heap, the kube-apiserver's and etcd's resident size
// and etcd's database (docs/perf.md, "10,000 apps"). Apps are seeded as
// the platform's API creates them, with the App controller's finalizer,
// or without it (--finalizer=false).
//
// It owns nothing the platform runs: it starts the control plane, Postgres
// and a DNS server, seeds them, and runs the platform's own controllers
// (package controllers), API (web/api) and edge (internal/edge) over them
// in its process. The runtime it hands the release pipeline runs no app
// and reports each as running its current release.
package main
