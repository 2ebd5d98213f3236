package dnstest

import (
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"hash"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/miekg/dns"
)

// zone is a zone the server takes updates for.
type zone struct {
	// key is the name of the TSIG key that may update it.
	key string
}

// Key is a TSIG key.
type Key struct {
	// Name is the key's name.
	Name string
	// Algorithm is "hmac-sha1", "hmac-sha224", "hmac-sha256",
	// "hmac-sha384" or "hmac-sha512"; empty means hmac-sha256.
	Algorithm string
	// Secret is base64.
	Secret string
}

// AcceptUpdates makes the server the primary of zone: it answers SOA
// queries for the zone's apex and applies RFC 2136 dynamic updates of the
// zone's TXT, A and AAAA records that are signed with key. It refuses
// unsigned updates and updates signed with another known key (REFUSED),
// and answers NOTAUTH to updates signed with an unknown key, another
// algorithm or a wrong secret, as BIND does. Records it adds answer
// queries like those set with SetTXT and SetA.
func (s *Server) AcceptUpdates(zoneName string, key Key) {
	if key.Algorithm == "" {
		key.Algorithm = "hmac-sha256"
	}
	key.Name, key.Algorithm = dns.CanonicalName(key.Name), dns.CanonicalName(key.Algorithm)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.zones[dns.CanonicalName(zoneName)] = zone{key: key.Name}
	s.keys[key.Name] = key
}

// TXT returns the values of name's TXT records, in the order they were
// added.
func (s *Server) TXT(name string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.txt[dns.CanonicalName(name)])
}

// acceptUpdates is miekg/dns's default acceptance of messages (queries and
// NOTIFY), plus dynamic updates, whose sections hold many records.
func acceptUpdates(h dns.Header) dns.MsgAcceptAction {
	const qr = 1 << 15
	if opcode := int(h.Bits>>11) & 0xF; opcode == dns.OpcodeUpdate && h.Bits&qr == 0 {
		return dns.MsgAccept
	}
	return dns.DefaultMsgAcceptFunc(h)
}

// soa is the SOA record of a zone the server is primary of.
func soa(apex string) *dns.SOA {
	return &dns.SOA{
		Hdr: dns.RR_Header{Name: apex, Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: ttl},
		Ns:  "ns." + apex, Mbox: "hostmaster." + apex,
		Serial: 1, Refresh: 3600, Retry: 600, Expire: 86400, Minttl: ttl,
	}
}

// update applies a dynamic update (RFC 2136 section 3): the zone must be
// one of the server's, the update signed with its key, every record in the
// zone and of a type the server keeps; then all changes apply at once.
func (s *Server) update(w dns.ResponseWriter, req *dns.Msg) {
	m := new(dns.Msg)
	m.SetRcode(req, s.applyUpdate(w, req))
	// A reply to a well-signed update is signed with the same key.
	if t := req.IsTsig(); t != nil && w.TsigStatus() == nil {
		m.SetTsig(t.Hdr.Name, t.Algorithm, 300, time.Now().Unix())
	}
	_ = w.WriteMsg(m)
}

func (s *Server) applyUpdate(w dns.ResponseWriter, req *dns.Msg) int {
	if len(req.Question) != 1 || req.Question[0].Qtype != dns.TypeSOA {
		return dns.RcodeFormatError
	}
	apex := dns.CanonicalName(req.Question[0].Name)
	s.mu.Lock()
	defer s.mu.Unlock()
	z, ok := s.zones[apex]
	switch t := req.IsTsig(); {
	case !ok:
		return dns.RcodeNotAuth
	case t == nil:
		return dns.RcodeRefused
	case w.TsigStatus() != nil:
		return dns.RcodeNotAuth
	case dns.CanonicalName(t.Hdr.Name) != z.key:
		return dns.RcodeRefused
	case len(req.Answer) > 0:
		// Prerequisites are not needed by the code under test.
		return dns.RcodeNotImplemented
	}
	for _, rr := range req.Ns {
		h := rr.Header()
		if !dns.IsSubDomain(apex, dns.CanonicalName(h.Name)) {
			return dns.RcodeNotZone
		}
		switch h.Rrtype {
		case dns.TypeTXT, dns.TypeA, dns.TypeAAAA:
		case dns.TypeANY:
			if h.Class != dns.ClassANY {
				return dns.RcodeFormatError
			}
		default:
			return dns.RcodeNotImplemented
		}
	}
	for _, rr := range req.Ns {
		s.apply(rr)
	}
	return dns.RcodeSuccess
}

// apply makes one change of an update's update section: class IN adds the
// record, NONE deletes it, ANY deletes the name's records of the type (or
// of every type, with type ANY).
func (s *Server) apply(rr dns.RR) {
	h := rr.Header()
	name := dns.CanonicalName(h.Name)
	switch h.Class {
	case dns.ClassINET:
		switch rr := rr.(type) {
		case *dns.TXT:
			if v := strings.Join(rr.Txt, ""); !slices.Contains(s.txt[name], v) {
				s.txt[name] = append(s.txt[name], v)
			}
		case *dns.A:
			s.addAddr(name, rr.A)
		case *dns.AAAA:
			s.addAddr(name, rr.AAAA)
		}
	case dns.ClassNONE:
		switch rr := rr.(type) {
		case *dns.TXT:
			v := strings.Join(rr.Txt, "")
			s.txt[name] = slices.DeleteFunc(s.txt[name], func(x string) bool { return x == v })
		case *dns.A:
			s.removeAddr(name, rr.A)
		case *dns.AAAA:
			s.removeAddr(name, rr.AAAA)
		}
	case dns.ClassANY:
		if h.Rrtype == dns.TypeTXT || h.Rrtype == dns.TypeANY {
			delete(s.txt, name)
		}
		if h.Rrtype != dns.TypeTXT {
			s.addrs[name] = slices.DeleteFunc(s.addrs[name], func(a netip.Addr) bool {
				return h.Rrtype == dns.TypeANY || a.Is4() == (h.Rrtype == dns.TypeA)
			})
		}
	}
}

func (s *Server) addAddr(name string, ip []byte) {
	if a, ok := netip.AddrFromSlice(ip); ok && !slices.Contains(s.addrs[name], a.Unmap()) {
		s.addrs[name] = append(s.addrs[name], a.Unmap())
	}
}

func (s *Server) removeAddr(name string, ip []byte) {
	if a, ok := netip.AddrFromSlice(ip); ok {
		s.addrs[name] = slices.DeleteFunc(s.addrs[name], func(x netip.Addr) bool { return x == a.Unmap() })
	}
}

// tsigKeys signs and verifies messages with the server's keys, which tests
// add while it runs.
type tsigKeys struct{ s *Server }

func (k tsigKeys) Generate(msg []byte, t *dns.TSIG) ([]byte, error) {
	k.s.mu.Lock()
	key, ok := k.s.keys[dns.CanonicalName(t.Hdr.Name)]
	k.s.mu.Unlock()
	if !ok {
		return nil, dns.ErrSecret
	}
	if dns.CanonicalName(t.Algorithm) != key.Algorithm {
		return nil, dns.ErrKeyAlg
	}
	raw, err := base64.StdEncoding.DecodeString(key.Secret)
	if err != nil {
		return nil, err
	}
	var h func() hash.Hash
	switch dns.CanonicalName(t.Algorithm) {
	case dns.HmacSHA1:
		h = sha1.New
	case dns.HmacSHA224:
		h = sha256.New224
	case dns.HmacSHA256:
		h = sha256.New
	case dns.HmacSHA384:
		h = sha512.New384
	case dns.HmacSHA512:
		h = sha512.New
	default:
		return nil, dns.ErrKeyAlg
	}
	mac := hmac.New(h, raw)
	mac.Write(msg)
	return mac.Sum(nil), nil
}

func (k tsigKeys) Verify(msg []byte, t *dns.TSIG) error {
	want, err := k.Generate(msg, t)
	if err != nil {
		return err
	}
	got, err := hex.DecodeString(t.MAC)
	if err != nil {
		return err
	}
	if !hmac.Equal(want, got) {
		return dns.ErrSig
	}
	return nil
}
