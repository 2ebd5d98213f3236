// Package upgrade is the mixed-version suite (make test-upgrade): each
// scenario starts a fresh control plane of three pinned kube-apiservers and
// etcd behind the plane's TCP load balancer (internal/controlplane), with the
// platform CRDs and the scheduler's aggregated API (apiserver/local), runs a
// tenant's load through the load balancer the whole time, and rolls the
// apiservers one at a time with internal/upgrade/rollout, gated by the
// upgrade verifier (internal/upgrade/verify) run against every live
// apiserver directly. Preflight (internal/upgrade/preflight) decides whether
// an upgrade may start, from the flags the running apiservers carry.
//
// The suite records each scenario as the FleetUpgrade controller would, as
// runs, steps and probe samples in Postgres (internal/store), and hands
// operators out/upgrade-report.json, out/upgrade-report.md and one SVG
// timeline per scenario. It runs only with BEX_TEST_UPGRADE=1, which
// make test-upgrade sets; plain go test skips it.
package upgrade
