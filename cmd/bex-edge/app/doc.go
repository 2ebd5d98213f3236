// Package app is the bex-edge command: its flags, and the wiring of an
// edge.Server to Postgres (shared certificates), the Kubernetes API (Routes
// from the management cluster, EndpointSlices from the cluster the edge runs
// in) and an issuer (ACME, or a local CA).
//
// Several bex-edge replicas may run against one database: they share
// certificates, ACME accounts, challenge tokens and locks, so each
// certificate is obtained once, by whichever replica first needs it, and a
// challenge is answered by whichever replica the CA reaches.
//
// With --app-metrics-token-file each replica counts the requests it serves
// per app (appmetrics.Totals) and serves them, behind that bearer token, at
// appmetrics.TotalsPath on its metrics listener: bex-web reads every
// replica's for the apps' series (docs/metrics.md).
package app
