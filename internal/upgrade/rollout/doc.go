// Package rollout replaces the apiservers of a local control plane
// (internal/controlplane) one at a time, the way KubeadmControlPlane rolls a
// control plane with maxSurge 0: for each outdated server it takes the server
// out of the load balancer and drains it, stops it, starts its replacement at
// the target version under a new name (a new machine, with a new hostname and
// address), waits until the replacement is ready and in the load balancer,
// and then calls a gate before it moves on.
//
// The gate is where the upgrade verifier runs and where a rollout is paused:
// it may block until it is resumed, or return an error to abort the rollout
// with the plane left as it is, a mix of versions. Run is level-based: it
// finds the outdated servers afresh before each step, so running it again
// after an abort resumes where the plane stands.
//
// Run hands every moment of the rollout (time, step, servers and their
// versions) to an event callback, from which a suite draws a timeline. A step
// may kill its old server with SIGKILL instead of stopping it cleanly, to
// rehearse a machine lost in the middle of a rollout.
package rollout
