// Command edgebench measures what the edge costs in front of an app, and
// what the proxies a user would pick instead cost doing the same work, in
// one run on loopback.
//
// It starts the server processes, each a child of the bench: the app (this
// binary re-executed as "edgebench app", a net/http server answering
// "Hello, world\n", and 16 KiB on /16k), the edge (re-executed as
// "edgebench edge": an edge.Server with a local CA, certmagic file storage and
// a Table that routes a default hostname over TLS and a PlainHTTP Route to the
// app, with the edge's Prometheus metrics on as deployed), and the proxies of
// --proxies: Caddy and Traefik (the pinned builds from internal/kubebin, built
// first when the cache lacks them), nginx and HAProxy (Debian's packages). Each
// proxy forwards to the app over keep-alive HTTP/1.1 on a plain port and on a
// TLS port that serves a certificate issued by the same local CA for the same
// hostname; none writes access logs or has an admin endpoint. nginx runs a
// master and one worker per --gomaxprocs, HAProxy as many threads, Caddy and
// Traefik with that GOMAXPROCS. The listeners are opened by the bench and
// handed to the children as file descriptors 3 and 4 (Caddy's fd/N
// listeners, nginx's NGINX variable, HAProxy's bind fd@N, Traefik's systemd
// socket activation), so no port is guessed.
//
// The load generator runs in the bench process: --concurrency keep-alive
// HTTP/1.1 connections (TLS 1.3 with SNI, trusting the local CA, ALPN
// http/1.1 offered to both proxies), each sending one GET after another for
// --warmup and then --duration; every latency of the measured window is kept,
// so p50 and p99 are exact. A request that is not a 200 with the expected
// body length, or that fails, is an error.
//
// Scenarios: direct (plain HTTP to the app), edge plain, edge TLS, and each
// proxy plain and TLS. Each round runs all of them once; rounds alternate the
// order (forward, then backward), and the report gives the median over rounds
// of each figure, every round's requests per second, and the ratios: each
// proxy's throughput over direct, the edge's over each proxy's (plain and
// TLS; above 1.00 means the edge served more), the edge's CPU per request
// over each proxy's (a proxy's CPU includes its worker processes; below 1.00
// means the edge spent less), and the p50 and p99 latency a proxy adds over
// direct. The ratios are the figures to compare between runs; absolute
// requests per second depend on the machine and on whatever else runs on it.
//
// Every Go process (load generator, app, edge, Caddy, Traefik) runs with the same
// GOMAXPROCS, --gomaxprocs, by default the number of CPUs. On a small machine
// the load generator competes with the servers for the same cores, so the
// figures are a lower bound and a proxy's cost shows as a share of the total
// CPU; the report says how many CPUs there were and the load average.
//
// A hidden flag, --edge-cpuprofile FILE, writes a CPU profile of the edge
// process over the whole run (the edge is idle outside its own scenarios);
// read it with go tool pprof.
//
// Run it with make bench-edge; docs/perf.md has a run's figures.
package main
