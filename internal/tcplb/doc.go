// Package tcplb is a small TCP load balancer, the local stand-in for a cloud
// load balancer in front of a control plane's apiservers (a Hetzner LB with
// one target per control-plane server).
//
// An LB listens on one address and forwards each accepted connection to one
// backend, round-robin, copying bytes both ways without looking at them: TLS
// passes through untouched, so clients verify the backend's certificate.
// Backends are added and removed at runtime. Removing a backend takes it out
// of the rotation at once, while its open connections go on until either end
// closes them; WaitDrained waits for that and CloseConns ends them, which
// together make a drain with a deadline. Hold keeps what clients send on a
// backend's open connections from reaching it, while what it sends still
// flows, until released: a server being stopped then sees the requests
// sent meanwhile only once it is ready to turn them away (see
// controlplane.StopDrained). A passive health rule keeps a dead
// backend from failing connections: when the dial to a backend fails, the
// next backend in the rotation is tried for the same connection.
//
// The LB owns its listener and every forwarded connection; Close releases
// them all. Stats hands per-backend counters (open connections, total
// connections, failed dials) to whoever reports on a rollout.
package tcplb
