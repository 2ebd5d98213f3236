// Package rfc2136 changes DNS records by RFC 2136 dynamic updates signed
// with a TSIG key (RFC 8945), the provider-neutral way to publish ACME
// DNS-01 challenges: BIND, Knot, PowerDNS and many hosted DNS services
// accept such updates for a zone the operator grants a key.
//
// Provider is a github.com/libdns/libdns RecordAppender and RecordDeleter,
// which is what certmagic's DNS01Solver needs; it sends each change as one
// signed UPDATE over TCP to the zone's primary server with
// github.com/miekg/dns, and fails with the server's answer when the server
// refuses it. Options binds its configuration to the flags of bex-edge and
// bex-embedded (--acme-dns-rfc2136-*) and hands internal/edge a Provider.
package rfc2136
