package domains

import (
	"context"
	"crypto/sha256"
	"encoding/base32"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"

	"golang.org/x/net/publicsuffix"
)

const (
	// ChallengeLabel is the label in front of a hostname where its TXT
	// record is looked up.
	ChallengeLabel = "_bex-challenge"
	// tokenPrefix starts every token, so that a record tells what it is
	// for among a domain's other TXT records.
	tokenPrefix = "bex-verify="
	// tokenLen is how many base32 characters of the hash a token carries
	// (160 bits).
	tokenLen = 32
)

// Reasons a hostname is refused; Refusal.Reason holds one.
const (
	// ReasonReserved: the platform serves the name itself.
	ReasonReserved = "HostnameReserved"
	// ReasonNotRegistrable: the name is a public suffix, or a wildcard
	// over one.
	ReasonNotRegistrable = "HostnameNotRegistrable"
)

// Refusal is why a hostname cannot be claimed by any tenant. It is a
// property of the name and the platform, not of who asks: an invalid spec,
// not a wait.
type Refusal struct {
	// Reason is ReasonReserved or ReasonNotRegistrable.
	Reason string
	// Message says what is wrong and what to do, as one sentence.
	Message string
}

func (r *Refusal) Error() string { return r.Message }

// Policy is the platform's rule for Routes' hostnames. The zero Policy
// reserves nothing and refuses only public suffixes.
type Policy struct {
	// AppDomain is the domain of default hostnames, <app>-<tenant>.<domain>
	// (a port is ignored). The domain, its names and wildcards over them
	// are the platform's; a tenant's own default hostname needs no proof.
	AppDomain string
	// Reserved are more names the platform serves (the API, the dashboard,
	// git and the registry): a name reserves itself; "*.name" reserves
	// name and everything under it. Ports are ignored.
	Reserved []string
}

// Normalize writes a domain the way comparisons need it: lower-case,
// without a port, without leading or trailing dots.
func Normalize(d string) string {
	d = strings.TrimSpace(d)
	if h, _, err := net.SplitHostPort(d); err == nil {
		d = h
	}
	return strings.Trim(strings.ToLower(d), ".")
}

// under reports whether host is domain or a name below it.
func under(host, domain string) bool {
	return domain != "" && (host == domain || strings.HasSuffix(host, "."+domain))
}

// base is the name a hostname's proof is about: the hostname, or for a
// wildcard (*.example.com) the domain the wildcard is over.
func base(host string) string {
	if rest, ok := strings.CutPrefix(host, "*."); ok {
		return rest
	}
	return host
}

// covers reports whether hostname pattern host (maybe a wildcard) could
// serve the name n: host is n, or a wildcard one label above n, or a
// wildcard over n itself (*.n also claims n's subtree's certificates).
func covers(host, n string) bool {
	if host == n {
		return true
	}
	b, wild := strings.CutPrefix(host, "*.")
	if !wild {
		return false
	}
	_, parent, ok := strings.Cut(n, ".")
	return (ok && parent == b) || n == b
}

// WildcardCovers reports whether wildcard w (*.example.com) matches host
// (www.example.com) as the edge routes it: exactly one label in place of
// the '*'. A wildcard covers no other wildcard.
func WildcardCovers(w, host string) bool {
	suffix, ok := strings.CutPrefix(w, "*.")
	if !ok || suffix == "" || strings.HasPrefix(host, "*.") {
		return false
	}
	_, parent, found := strings.Cut(host, ".")
	return found && parent == suffix
}

// Overlap reports whether the edge could route some request name under
// both hostnames a and b: the same hostname, or a wildcard and a name it
// covers. Two tenants' Routes may not overlap.
func Overlap(a, b string) bool {
	return a == b || WildcardCovers(a, b) || WildcardCovers(b, a)
}

// Check says why no tenant may claim host (a lower-case hostname as the
// Route CRD admits it, maybe a wildcard), or returns nil. Names under
// AppDomain are refused here only when they cannot be a default hostname
// (the apex, a wildcard, a name two labels down); whether a default
// hostname is the tenant's own is DefaultHostnameApp's question.
func (p Policy) Check(host string) *Refusal {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	b := base(host)
	if d := Normalize(p.AppDomain); d != "" {
		label, isDefault := strings.CutSuffix(host, "."+d)
		switch {
		case covers(host, d):
			return &Refusal{ReasonReserved, fmt.Sprintf("%s is the platform's own: apps answer under %s; use a domain of your own", host, d)}
		case isDefault && (strings.Contains(label, ".") || strings.HasPrefix(host, "*.")):
			return &Refusal{ReasonReserved, fmt.Sprintf("%s is under the platform's domain %s, where only apps' default hostnames (<app>-<tenant>.%s) are served; use a domain of your own", host, d, d)}
		}
	}
	for _, r := range p.Reserved {
		r = Normalize(r)
		rb, subtree := strings.CutPrefix(r, "*.")
		if rb == "" {
			continue
		}
		if covers(host, rb) || subtree && under(b, rb) {
			return &Refusal{ReasonReserved, fmt.Sprintf("%s is reserved: the platform serves %s itself; use a domain of your own", host, r)}
		}
	}
	suffix, _ := publicsuffix.PublicSuffix(b)
	if suffix == b {
		if b != host {
			return &Refusal{ReasonNotRegistrable, fmt.Sprintf("%s is a wildcard over %s, a public suffix under which anyone may register names: a wildcard must be under a domain of your own, such as *.example.%s", host, b, b)}
		}
		return &Refusal{ReasonNotRegistrable, fmt.Sprintf("%s is a public suffix, under which anyone may register names, not a domain of your own: use a name under a domain you registered", host)}
	}
	return nil
}

// DefaultHostnameApp returns the app whose default hostname host is, when
// host is <app>-<tenant>.<AppDomain> for this tenant; such a name needs no
// TXT record. The caller checks that the app exists.
func (p Policy) DefaultHostnameApp(tenant, host string) (string, bool) {
	d := Normalize(p.AppDomain)
	if d == "" || tenant == "" {
		return "", false
	}
	label, ok := strings.CutSuffix(host, "."+d)
	if !ok || strings.ContainsAny(label, ".*") {
		return "", false
	}
	app, ok := strings.CutSuffix(label, "-"+tenant)
	if !ok || app == "" {
		return "", false
	}
	return app, true
}

// ChallengeName is where host's TXT record is looked up:
// _bex-challenge.www.example.com for www.example.com and for
// *.www.example.com.
func ChallengeName(host string) string {
	return ChallengeLabel + "." + base(host)
}

// Token is the TXT value that proves tenant may serve host on the platform
// whose apps' domain is appDomain. It is the same for the same three
// inputs in every process.
func Token(appDomain, tenant, host string) string {
	sum := sha256.Sum256([]byte("bex domain verification\x00" + Normalize(appDomain) + "\x00" + tenant + "\x00" + strings.ToLower(host)))
	enc := base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(sum[:])
	return tokenPrefix + strings.ToLower(enc[:tokenLen])
}

// TXTResolver looks TXT records up; *net.Resolver implements it.
// LookupTXT returns the strings of each record, each record's strings
// joined. A name with no TXT record returns an error for which
// IsNotFound is true.
type TXTResolver interface {
	LookupTXT(ctx context.Context, name string) ([]string, error)
}

var _ TXTResolver = (*net.Resolver)(nil)

// TXTValues looks the challenge name of host up: its TXT values, trimmed,
// with none for a name that has no record. An error means DNS could not
// answer.
func TXTValues(ctx context.Context, r TXTResolver, host string) ([]string, error) {
	vals, err := r.LookupTXT(ctx, ChallengeName(host))
	if IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("looking up TXT %s: %w", ChallengeName(host), err)
	}
	out := make([]string, 0, len(vals))
	for _, v := range vals {
		out = append(out, strings.TrimSpace(v))
	}
	return out, nil
}

// Verified reports whether values, the TXT values at host's challenge
// name, hold tenant's token.
func Verified(values []string, appDomain, tenant, host string) bool {
	return slices.Contains(values, Token(appDomain, tenant, host))
}

// IsNotFound reports whether err says a name has no record.
func IsNotFound(err error) bool {
	var dnsErr *net.DNSError
	return errors.As(err, &dnsErr) && dnsErr.IsNotFound
}

// ResolverAt returns a resolver that asks the DNS server at addr
// (host:port, over UDP and TCP as Go's resolver does) instead of the
// system's; addr "" returns net.DefaultResolver.
func ResolverAt(addr string) *net.Resolver {
	if addr == "" {
		return net.DefaultResolver
	}
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}}
}

// ValidateResolverAddr says what is wrong with a --dns-resolver value.
func ValidateResolverAddr(addr string) error {
	if addr == "" {
		return nil
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host == "" || port == "" {
		return fmt.Errorf("%q is not host:port, such as 127.0.0.1:53", addr)
	}
	return nil
}
