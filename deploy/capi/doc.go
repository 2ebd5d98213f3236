// Package capi embeds the Cluster API templates bex ships: under hetzner/,
// the clusterctl template of a Hetzner (CAPH) cluster with the Mixed Version
// Proxy wired and maxSurge 0, and the stock KubeadmControlPlane it is
// compared with. test/install dry-runs and preflights them.
package capi
