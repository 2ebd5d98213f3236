// Package mvp reads what an apiserver says about the Kubernetes Mixed Version
// Proxy: its aggregated discovery with and without peers (the nopeer
// profile), the skew set between two servers (the resources one serves and
// the other does not), and the peer-proxy metrics.
//
// It talks to one apiserver at a time, through a rest.Config that points at
// that server directly; it never decides anything. The fleet-upgrade verifier
// and the tests build their verdicts on it.
package mvp
