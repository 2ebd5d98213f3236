// Package acmetest runs a real ACME CA for a test: Let's Encrypt's pebble,
// with pebble-challtestsrv as the DNS server pebble resolves names with, both
// as child processes on 127.0.0.1 and free ports, stopped when the test ends.
// It hands the test a directory URL and the CA to trust it with, control over
// which names point here, pebble's issuing root, and a count of the orders
// pebble accepted per name. Tests of the edge (internal/edge) use it to obtain
// certificates the way production does, and to check that a name nobody
// points here gets no certificate.
//
// # Use
//
//	p := acmetest.Start(t, acmetest.Options{HTTPPort: edgeHTTPPort, TLSPort: edgeTLSPort})
//	p.SetA("app.example.test", "127.0.0.1") // this name points at the edge
//	// Point the ACME client at p.DirectoryURL(), trusting p.DirectoryCA();
//	// for certmagic: certmagic.ACMEIssuer{CA: p.DirectoryURL(),
//	// TrustedRoots: p.DirectoryCA(), Agreed: true, ...}.
//	roots, err := p.IssuerRoots(ctx) // verify what the edge serves against roots
//	n := p.Orders("app.example.test") // orders pebble accepted for the name
//
// Pebble validates HTTP-01 by connecting to Options.HTTPPort, and TLS-ALPN-01
// to Options.TLSPort, on the address the name's A record gives, so the server
// under test must listen on 127.0.0.1 at those ports. A name without an A
// record (never set with SetA, or removed with ClearA) does not resolve:
// challtestsrv is started with no default A or AAAA answer (its defaults
// would point every name at 127.0.0.1 and ::1), so validation for such a
// name fails with a connection problem and no request reaches the server
// under test.
//
// With Options.DNSServer, pebble resolves names with a DNS server the test
// runs instead, such as a dnstest.Server that takes the RFC 2136 updates an
// ACME client sends to publish DNS-01 challenges; challtestsrv is not
// started, and records are set at that server.
//
// Pebble runs deterministically where it can: no random validation delays
// (PEBBLE_VA_NOSLEEP), no rejected nonces, one root and one intermediate,
// ECDSA keys, one certificate profile (90 days), no Retry-After delays, and
// authorization reuse set to 0% (pebble's check still reuses an account's
// valid authorization for a name 1 time in 100, so a test should not count
// validations of a second order). It still validates for real.
//
// The directory is served through a small reverse proxy in the test process,
// with a throwaway certificate for 127.0.0.1 signed by a throwaway CA
// (DirectoryCA, DirectoryCAFile); that CA is unrelated to the one pebble
// issues from (IssuerRoots, Intermediates). The proxy exists to count orders:
// pebble v2.10.3 logs a new order's ID but not its names, so the proxy reads
// the names from each new-order request pebble answers with 201 Created.
// Orders counts orders, not validations or certificates: an order that then
// fails validation counts too.
//
// Log returns pebble's and challtestsrv's output together with the proxy's
// lines ("acmetest: pebble accepted an order for ..."); when a test fails, its
// last lines are printed.
//
// # Cost
//
// The binaries are built by internal/kubebin from the Go module proxy into
// the user's cache directory the first time (`make kubebin` does it ahead of
// `make test`): on 2 busy cores pebble took 53 seconds and
// pebble-challtestsrv 2 more (they share nearly every package). Afterwards
// Start takes well under a second: both servers start in a few hundred
// milliseconds, and a certificate for one name takes about half a second.
package acmetest
