// Package continuity holds the continuity suite (package continuity_test,
// make test-continuity): the whole platform runs against a management
// control plane of three apiservers behind a load balancer while a tenant
// pushes with the real git, calls the API and the bex CLI; the apiservers
// are replaced one at a time from 1.36.3 to 1.37.2 (maxSurge 0), each step
// gated by the MVP verifier on every apiserver. It writes
// out/continuity-report.json and .md with an SVG timeline.
package continuity
