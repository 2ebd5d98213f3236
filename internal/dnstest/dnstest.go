package dnstest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"testing"

	"github.com/miekg/dns"
)

// ttl is the TTL of every answer: nothing caches between a test's changes.
const ttl = 0

// Server is a DNS server for one test. Its methods are safe for concurrent
// use.
type Server struct {
	addr    string
	servers []*dns.Server

	mu    sync.Mutex
	txt   map[string][]string     // fqdn → values
	addrs map[string][]netip.Addr // fqdn → A and AAAA
	zones map[string]zone         // apex → the zone's update key
	keys  map[string]Key          // TSIG key name → key
}

// Start starts a server on 127.0.0.1 and a free port, UDP and TCP, stopped
// when the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	s, err := Listen()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// Listen starts a server on 127.0.0.1 and a free port, UDP and TCP, for a
// program that is not a test (a benchmark); Close stops it.
func Listen() (*Server, error) {
	s := &Server{txt: map[string][]string{}, addrs: map[string][]netip.Addr{}, zones: map[string]zone{}, keys: map[string]Key{}}
	// Take a port free for TCP and bind UDP on the same one; retry when
	// something else took the UDP side in between.
	var tcp net.Listener
	var udp net.PacketConn
	for range 20 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("dnstest: %w", err)
		}
		pc, err := net.ListenPacket("udp", l.Addr().String())
		if err == nil {
			tcp, udp = l, pc
			break
		}
		l.Close()
	}
	if tcp == nil {
		return nil, errors.New("dnstest: no port free for both UDP and TCP")
	}
	s.addr = tcp.Addr().String()
	h := dns.HandlerFunc(s.serve)
	s.servers = []*dns.Server{{Listener: tcp, Handler: h}, {PacketConn: udp, Handler: h}}
	for _, srv := range s.servers {
		srv.MsgAcceptFunc = acceptUpdates
		srv.TsigProvider = tsigKeys{s}
		started := make(chan struct{})
		srv.NotifyStartedFunc = func() { close(started) }
		go func() { _ = srv.ActivateAndServe() }()
		<-started
	}
	return s, nil
}

// Close stops the server.
func (s *Server) Close() {
	for _, srv := range s.servers {
		_ = srv.Shutdown()
	}
}

// Addr is the server's host:port, for a --dns-resolver flag.
func (s *Server) Addr() string { return s.addr }

// Resolver returns a resolver that asks only this server.
func (s *Server) Resolver() *net.Resolver {
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, s.addr)
	}}
}

// SetTXT makes name answer TXT queries with values, one record each;
// no values removes its records.
func (s *Server) SetTXT(name string, values ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.txt[dns.CanonicalName(name)] = values
}

// SetA makes name answer A and AAAA queries with addrs (IPv4 and IPv6
// addresses); no addrs removes its records. It panics on an address that
// does not parse: a test's mistake.
func (s *Server) SetA(name string, addrs ...string) {
	ips := make([]netip.Addr, 0, len(addrs))
	for _, a := range addrs {
		ips = append(ips, netip.MustParseAddr(a))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.addrs[dns.CanonicalName(name)] = ips
}

func (s *Server) serve(w dns.ResponseWriter, req *dns.Msg) {
	if req.Opcode == dns.OpcodeUpdate {
		s.update(w, req)
		return
	}
	m := new(dns.Msg)
	m.SetReply(req)
	m.Authoritative = true
	s.mu.Lock()
	for _, q := range req.Question {
		name := dns.CanonicalName(q.Name)
		hdr := dns.RR_Header{Name: q.Name, Class: dns.ClassINET, Rrtype: q.Qtype, Ttl: ttl}
		_, apex := s.zones[name]
		if len(s.txt[name]) == 0 && len(s.addrs[name]) == 0 && !apex {
			m.Rcode = dns.RcodeNameError
			continue
		}
		switch q.Qtype {
		case dns.TypeSOA:
			if apex {
				m.Answer = append(m.Answer, soa(name))
			}
		case dns.TypeTXT:
			for _, v := range s.txt[name] {
				m.Answer = append(m.Answer, &dns.TXT{Hdr: hdr, Txt: splitTXT(v)})
			}
		case dns.TypeA, dns.TypeAAAA:
			for _, ip := range s.addrs[name] {
				switch {
				case q.Qtype == dns.TypeA && ip.Is4():
					m.Answer = append(m.Answer, &dns.A{Hdr: hdr, A: ip.AsSlice()})
				case q.Qtype == dns.TypeAAAA && ip.Is6():
					m.Answer = append(m.Answer, &dns.AAAA{Hdr: hdr, AAAA: ip.AsSlice()})
				}
			}
		}
	}
	s.mu.Unlock()
	_ = w.WriteMsg(m)
}

// splitTXT cuts a value into the 255-byte strings a TXT record holds.
func splitTXT(v string) []string {
	var out []string
	for len(v) > 255 {
		out = append(out, v[:255])
		v = v[255:]
	}
	return append(out, v)
}
