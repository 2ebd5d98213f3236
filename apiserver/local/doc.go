// Package local runs bex-apiserver in-process beside a control plane of
// internal/controlplane — what embedded mode (make run) and the end-to-end
// tests do: it installs the Cluster API CRDs, makes the serving certificate
// and the server's own client identity, starts the server with its storage in
// the control plane's etcd, registers it through an ExternalName Service
// "localhost" and an APIService, and returns once the aggregator reports it
// Available and its caches are synced.
package local
