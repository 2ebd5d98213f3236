// Package dnstest runs a real DNS server for a test: github.com/miekg/dns
// on 127.0.0.1, UDP and TCP on one free port, answering A, AAAA and TXT
// records the test sets while it runs and NXDOMAIN for every other name.
// It hands the test its address and a *net.Resolver that asks only it, so
// that code under test goes through Go's real resolver and the DNS wire
// protocol rather than a stub of its interface.
//
//	srv := dnstest.Start(t)
//	srv.SetTXT("_bex-challenge.www.example.test", token)
//	srv.SetA("www.example.test", "192.0.2.10")
//	r := srv.Resolver() // or point a --dns-resolver flag at srv.Addr()
//
// A program that is not a test (a benchmark) starts one with Listen and
// stops it with Close.
//
// A zone given to AcceptUpdates is one the server is primary of, as BIND
// or Knot would be: it answers the zone's SOA and applies RFC 2136 dynamic
// updates of its TXT, A and AAAA records signed with the zone's TSIG key,
// refusing unsigned and wrongly signed ones. Code that publishes ACME
// DNS-01 challenges (internal/rfc2136) is tested against it, and pebble
// can validate against it (acmetest.Options.DNSServer); TXT reads back
// what the updates left.
//
//	srv.AcceptUpdates("example.test", dnstest.Key{Name: "edge", Secret: base64Secret})
//	srv.TXT("_acme-challenge.example.test") // what an update added
package dnstest
