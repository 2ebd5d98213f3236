// Package hetzner is what the fleet upgrade asks of the Hetzner Cloud API,
// through hcloud-go v2: the hand-off of a control-plane server between the
// cluster's API load balancer and Cluster API's machine replacement, and the
// account's capacity to create one more server for a surging rollout.
//
// LoadBalancerHandoff removes an old control-plane server from the API load
// balancer before its Machine is deleted (find the server by name or label
// selector, remove the target, wait for the action, then wait a drain period
// so in-flight requests finish), and adds a new server once its apiserver is
// healthy (add the target, wait for the action and for the load balancer's
// own health checks to call it healthy on every service port). Both are
// idempotent: a target already gone, or already there, is not an error.
// Account.SurgeCapacity reads the server type's availability, deprecation
// and price in a location, as far as the API exposes them (it has no quota
// endpoint).
//
// Errors are wrapped with what failed and keep the API's error, so
// hcloud.IsError(err, code) works on them. Rate limits and conflicts are
// retried by hcloud-go itself; a locked load balancer (another action
// running) is retried here. Tests run against internal/hetzner/hcloudfake.
package hetzner
