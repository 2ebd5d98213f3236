// Package edge is the platform's HTTP front door: a reverse proxy that
// routes each request by Host (and path prefix) to one of an app's healthy
// upstreams, round-robin.
//
// Where routes come from is a Resolver's business: DefaultHosts serves
// "<app>-<tenant>.<domain>" from a runtime's routing table (the process
// driver's Upstreams); Route objects and TLS come later on top of the same
// Proxy. The Proxy hands the request to the upstream with X-Forwarded-For,
// -Host and -Proto set, streams the response as it comes (server-sent events,
// long polls), passes WebSocket upgrades through, and retries a request that
// could not reach an upstream once on another, so that a cut-over between
// releases never surfaces as an error.
package edge
