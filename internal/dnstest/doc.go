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
package dnstest
