// Package continuity holds the continuity suite (package continuity_test,
// make test-continuity): the whole platform runs as make run has it, its
// control plane taken over by three machines of the local fleet that the
// real KubeadmControlPlane makes, while a tenant pushes with the real git,
// calls the API and the bex CLI; a FleetUpgrade rolls the plane from
// 1.36.3 to 1.37.2 (maxSurge 0), each machine held by the deletion-hook
// gate until the MVP verifier passed on every apiserver. A second
// scenario rolls a workload cluster under a tenant's app. It writes
// out/continuity-report.json and .md with an SVG timeline of the
// management plane's.
package continuity
