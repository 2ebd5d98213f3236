// Package app is the bex-web command: its flags, and the wiring of the
// platform's JSON API (web/api) to Postgres, the management cluster and the
// releaser of a cluster deployment (cmd/internal/workload), served on
// one HTTP listener with a second one for /metrics, /healthz and /readyz.
//
// The API owns /api/v1/. Everything else on the listener goes to
// Options.Dashboard, the place web/dashboard mounts at "/" once it exists;
// until then those paths answer 404.
//
// Every replica samples the apps' series (internal/appmetrics) over the
// workload cluster's kube driver and the edges' request totals
// (--edge-metrics), for GET /api/v1/apps/{app}/metrics; the replica that
// holds the series lock (a Postgres advisory lock) saves them
// (series.go).
package app
