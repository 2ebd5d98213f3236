// Package hcloudfake is a stateful fake of the Hetzner Cloud API for tests:
// an httptest server that speaks the real JSON shapes (hcloud-go's schema
// package) of the endpoints bex uses — servers, load balancers and their
// add_target/remove_target actions, actions, server types and locations —
// and keeps state between requests.
//
// It behaves as the real API does where bex depends on it:
//
//   - actions start "running" and finish "success" (or "error", when
//     scripted) after a fixed number of later requests, not after wall-clock
//     time, so tests are deterministic and need no sleeps; a target change
//     takes effect when its action finishes;
//   - a load balancer with a running action answers 423 "locked";
//   - removing a target that is not there answers
//     "load_balancer_target_not_found", adding one twice
//     "target_already_defined", an unknown ID "not_found", all in the API's
//     error body {"error":{"code":...,"message":...}};
//   - targets carry a health status per service port that starts "unknown"
//     and moves on with each read of the load balancer, as scripted;
//   - RateLimit answers the next requests with 429 "rate_limit_exceeded";
//     FailNext fails the next request to a path with a given API error,
//     FailAlways every one until ClearFailures.
//
// Every change is appended to an ordered event log (target added or
// removed, server deleted, with the time and a sequence number), so a test
// can assert that a server left the load balancer before it was deleted.
// The fake is safe for concurrent use. It is not a general emulator: list
// filters are name, label_selector, status and id; nothing is created but
// what the test seeds.
package hcloudfake
