package rfc2136

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/libdns/libdns"
	"github.com/miekg/dns"
)

// Algorithms are the TSIG algorithms a key may use, by the names BIND's
// tsig-keygen and the flags use.
var algorithms = map[string]string{
	"hmac-sha1":   dns.HmacSHA1,
	"hmac-sha224": dns.HmacSHA224,
	"hmac-sha256": dns.HmacSHA256,
	"hmac-sha384": dns.HmacSHA384,
	"hmac-sha512": dns.HmacSHA512,
}

// DefaultAlgorithm is the TSIG algorithm of a key unless told otherwise,
// the default of BIND's tsig-keygen.
const DefaultAlgorithm = "hmac-sha256"

// defaultTimeout bounds one UPDATE exchange when the context sets no
// deadline.
const defaultTimeout = 30 * time.Second

// Provider adds and deletes records in one zone by signed dynamic updates.
// Its fields must not change once it is in use; its methods are safe for
// concurrent use and honour the context's cancellation.
type Provider struct {
	// Server is the host:port of the zone's primary server, which accepts
	// the updates.
	Server string
	// Zone is the zone the updates change, e.g. "example.com."; every
	// record must lie in it. The zone a caller passes is used only to make
	// relative record names absolute.
	Zone string
	// KeyName is the TSIG key's name, as the server knows it.
	KeyName string
	// Algorithm is one of hmac-sha1, -sha224, -sha256, -sha384 and -sha512;
	// empty means DefaultAlgorithm.
	Algorithm string
	// Secret is the key's secret, base64 as tsig-keygen prints it.
	Secret string
}

var (
	_ libdns.RecordAppender = (*Provider)(nil)
	_ libdns.RecordDeleter  = (*Provider)(nil)
)

// Check says what is wrong with the provider's configuration, if anything.
func (p *Provider) Check() error {
	var errs []error
	if _, _, err := splitHostPort(p.Server); err != nil {
		errs = append(errs, err)
	}
	if _, ok := dns.IsDomainName(p.Zone); !ok || p.Zone == "" || p.Zone == "." {
		errs = append(errs, fmt.Errorf("zone %q is not a domain name", p.Zone))
	}
	if _, ok := dns.IsDomainName(p.KeyName); !ok || p.KeyName == "" {
		errs = append(errs, fmt.Errorf("TSIG key name %q is not a domain name", p.KeyName))
	}
	if _, err := p.algorithm(); err != nil {
		errs = append(errs, err)
	}
	if raw, err := base64.StdEncoding.DecodeString(p.Secret); err != nil || len(raw) == 0 {
		errs = append(errs, errors.New("the TSIG secret is not base64 (as tsig-keygen prints it)"))
	}
	return errors.Join(errs...)
}

func splitHostPort(server string) (string, string, error) {
	i := strings.LastIndex(server, ":")
	if server == "" || i <= 0 || i == len(server)-1 {
		return "", "", fmt.Errorf("server %q is not host:port", server)
	}
	return server[:i], server[i+1:], nil
}

func (p *Provider) algorithm() (string, error) {
	name := p.Algorithm
	if name == "" {
		name = DefaultAlgorithm
	}
	alg, ok := algorithms[strings.TrimSuffix(strings.ToLower(name), ".")]
	if !ok {
		return "", fmt.Errorf("TSIG algorithm %q is not one of hmac-sha1, hmac-sha224, hmac-sha256, hmac-sha384, hmac-sha512", name)
	}
	return alg, nil
}

// AppendRecords adds recs, named relative to zone, in one update, and
// returns them. Records already there stay (a DNS server ignores an added
// record equal to one it has).
func (p *Provider) AppendRecords(ctx context.Context, zone string, recs []libdns.Record) ([]libdns.Record, error) {
	rrs, out, err := p.convert(zone, recs)
	if err != nil {
		return nil, err
	}
	m := new(dns.Msg)
	m.SetUpdate(dns.Fqdn(p.Zone))
	m.Insert(rrs)
	if err := p.exchange(ctx, m); err != nil {
		return nil, fmt.Errorf("adding %s: %w", describe(rrs), err)
	}
	return out, nil
}

// DeleteRecords removes recs, named relative to zone, in one update, and
// returns them. A record with no data removes every record of its name and
// type, and one with no type too every record of its name. Records that are
// not there are ignored: an update cannot tell which were, so every record
// asked for is returned.
func (p *Provider) DeleteRecords(ctx context.Context, zone string, recs []libdns.Record) ([]libdns.Record, error) {
	m := new(dns.Msg)
	m.SetUpdate(dns.Fqdn(p.Zone))
	out := make([]libdns.Record, 0, len(recs))
	var described []dns.RR
	for _, rec := range recs {
		rr := rec.RR()
		name, err := p.absolute(rr.Name, zone)
		if err != nil {
			return nil, err
		}
		hdr := dns.RR_Header{Name: name, Class: dns.ClassINET}
		switch {
		case rr.Type == "":
			m.RemoveName([]dns.RR{&dns.ANY{Hdr: hdr}})
		case rr.Data == "":
			typ, ok := dns.StringToType[strings.ToUpper(rr.Type)]
			if !ok {
				return nil, fmt.Errorf("record type %q is unknown", rr.Type)
			}
			hdr.Rrtype = typ
			m.RemoveRRset([]dns.RR{&dns.ANY{Hdr: hdr}})
		default:
			one, err := toRR(name, rr)
			if err != nil {
				return nil, err
			}
			m.Remove([]dns.RR{one})
			described = append(described, one)
		}
		out = append(out, parsed(rr))
	}
	if err := p.exchange(ctx, m); err != nil {
		return nil, fmt.Errorf("deleting %d records %s: %w", len(recs), describe(described), err)
	}
	return out, nil
}

// convert turns recs into resource records of p.Zone.
func (p *Provider) convert(zone string, recs []libdns.Record) ([]dns.RR, []libdns.Record, error) {
	rrs := make([]dns.RR, 0, len(recs))
	out := make([]libdns.Record, 0, len(recs))
	for _, rec := range recs {
		rr := rec.RR()
		name, err := p.absolute(rr.Name, zone)
		if err != nil {
			return nil, nil, err
		}
		one, err := toRR(name, rr)
		if err != nil {
			return nil, nil, err
		}
		rrs = append(rrs, one)
		out = append(out, parsed(rr))
	}
	return rrs, out, nil
}

// absolute returns the fully qualified name of a record named relative to
// zone, which must lie in p.Zone.
func (p *Provider) absolute(name, zone string) (string, error) {
	if zone == "" {
		zone = p.Zone
	}
	abs := dns.CanonicalName(libdns.AbsoluteName(name, dns.Fqdn(zone)))
	if !dns.IsSubDomain(dns.CanonicalName(p.Zone), abs) {
		return "", fmt.Errorf("record %s is not in zone %s, the zone the updates change", abs, dns.Fqdn(p.Zone))
	}
	return abs, nil
}

// toRR builds the resource record of rr at the absolute name.
func toRR(name string, rr libdns.RR) (dns.RR, error) {
	ttl := uint32(rr.TTL / time.Second)
	if strings.EqualFold(rr.Type, "TXT") {
		// Data is the unescaped text: split it as the wire format wants
		// rather than parse it as zone-file syntax.
		return &dns.TXT{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeTXT, Class: dns.ClassINET, Ttl: ttl}, Txt: splitTXT(rr.Data)}, nil
	}
	one, err := dns.NewRR(fmt.Sprintf("%s %d IN %s %s", name, ttl, rr.Type, rr.Data))
	if err != nil || one == nil {
		return nil, fmt.Errorf("record %s %s %q: %w", name, rr.Type, rr.Data, errors.Join(err, errors.New("not in zone-file syntax")))
	}
	return one, nil
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

// parsed returns rr as the libdns type of its kind, as libdns asks
// providers to return.
func parsed(rr libdns.RR) libdns.Record {
	if r, err := rr.Parse(); err == nil {
		return r
	}
	return rr
}

func describe(rrs []dns.RR) string {
	names := make([]string, 0, len(rrs))
	for _, rr := range rrs {
		names = append(names, rr.Header().Name+" "+dns.TypeToString[rr.Header().Rrtype])
	}
	return "(" + strings.Join(names, ", ") + ")"
}

// exchange signs m, sends it over TCP and checks the server's answer.
func (p *Provider) exchange(ctx context.Context, m *dns.Msg) error {
	alg, err := p.algorithm()
	if err != nil {
		return err
	}
	key := dns.Fqdn(strings.ToLower(p.KeyName))
	m.SetTsig(key, alg, 300, time.Now().Unix())
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, defaultTimeout)
		defer cancel()
	}
	c := &dns.Client{Net: "tcp", TsigSecret: map[string]string{key: p.Secret}}
	resp, _, err := c.ExchangeContext(ctx, m, p.Server)
	if err != nil {
		return fmt.Errorf("sending the update to %s: %w", p.Server, err)
	}
	if resp.Rcode != dns.RcodeSuccess {
		return fmt.Errorf("%s answered the update to zone %s, signed with key %s, with %s", p.Server, dns.Fqdn(p.Zone), key, rcodeMeaning(resp.Rcode))
	}
	return nil
}

// rcodeMeaning names an update's answer and what usually causes it.
func rcodeMeaning(rcode int) string {
	name := dns.RcodeToString[rcode]
	switch rcode {
	case dns.RcodeRefused:
		return name + " (the server does not let this key update the zone, or takes no updates)"
	case dns.RcodeNotAuth:
		return name + " (the server is not authoritative for the zone, or the key's name, algorithm or secret is wrong, or the clocks differ by more than 5 minutes)"
	case dns.RcodeNotZone:
		return name + " (a record is outside the zone)"
	}
	return name
}
