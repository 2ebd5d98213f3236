package frontproxy

import (
	"bytes"
	"crypto/sha256"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"net/http"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/authenticatorfactory"
	"k8s.io/apiserver/pkg/authentication/group"
	"k8s.io/apiserver/pkg/authentication/request/headerrequest"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	"k8s.io/utils/clock"
)

const (
	// DefaultTTL is how long a verification is trusted at most. The CA
	// bundle is part of the key and the certificate's NotAfter bounds each
	// entry, so the TTL only bounds what the key cannot see: a change of
	// verification rules other than the CA bytes, or a clock stepped back
	// before a NotBefore. A minute keeps that window short and still
	// verifies the aggregator's certificate once a minute instead of
	// hundreds of times a second.
	DefaultTTL = time.Minute
	// DefaultSize bounds the cache. An aggregator presents one certificate
	// (one per kube-apiserver replica at most, two while its certificate
	// rotates); 64 leaves room and bounds what a flood of distinct valid
	// certificates can hold: the least recently used entry goes.
	DefaultSize = 64
	// maxChain bounds the certificates hashed into a key; a longer chain
	// is handed to the delegating authenticator uncached.
	maxChain = 8
)

// VerifyFunc verifies a certificate as (*x509.Certificate).Verify does.
type VerifyFunc func(cert *x509.Certificate, opts x509.VerifyOptions) ([][]*x509.Certificate, error)

// Options tune an Authenticator; the zero value is the production setting.
type Options struct {
	// TTL bounds how long a verification is trusted; zero means DefaultTTL.
	TTL time.Duration
	// Size bounds the number of verifications remembered; zero means
	// DefaultSize.
	Size int
	// Clock tells entries' age and the verification time; nil means the
	// real clock.
	Clock clock.PassiveClock
	// Verify verifies a chain; nil means (*x509.Certificate).Verify.
	// Tests count verifications through it.
	Verify VerifyFunc
}

// Authenticator authenticates requests of the front proxy whose certificate
// chain it verified recently, reading the user from the request headers,
// and hands every other request to the delegating authenticator. It is safe
// for concurrent use.
type Authenticator struct {
	ca      dynamiccertificates.CAContentProvider
	allowed headerrequest.StringSliceProvider
	// headers reads the user from the headers and adds
	// system:authenticated, as the delegating chain does for the front
	// proxy.
	headers authenticator.Request
	next    authenticator.Request

	ttl    time.Duration
	clock  clock.PassiveClock
	verify VerifyFunc
	cache  *cache.LRUExpireCache
}

var _ authenticator.Request = (*Authenticator)(nil)

// New returns an Authenticator for the front proxy configured by rh, in
// front of next, the generic server's delegating authenticator built from
// the same rh.
func New(rh *authenticatorfactory.RequestHeaderConfig, next authenticator.Request, o Options) (*Authenticator, error) {
	if rh == nil || rh.CAContentProvider == nil || rh.AllowedClientNames == nil ||
		rh.UsernameHeaders == nil || rh.UIDHeaders == nil || rh.GroupHeaders == nil || rh.ExtraHeaderPrefixes == nil {
		return nil, errors.New("front proxy authenticator: incomplete request-header config")
	}
	if next == nil {
		return nil, errors.New("front proxy authenticator: no delegating authenticator")
	}
	if o.TTL < 0 || o.Size < 0 {
		return nil, errors.New("front proxy authenticator: negative TTL or size")
	}
	if o.TTL == 0 {
		o.TTL = DefaultTTL
	}
	if o.Size == 0 {
		o.Size = DefaultSize
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Verify == nil {
		o.Verify = (*x509.Certificate).Verify
	}
	return &Authenticator{
		ca:      rh.CAContentProvider,
		allowed: rh.AllowedClientNames,
		headers: group.NewAuthenticatedGroupAdder(headerrequest.NewDynamic(
			rh.UsernameHeaders, rh.UIDHeaders, rh.GroupHeaders, rh.ExtraHeaderPrefixes)),
		next:   next,
		ttl:    o.TTL,
		clock:  o.Clock,
		verify: o.Verify,
		cache:  cache.NewLRUExpireCacheWithClock(o.Size, o.Clock),
	}, nil
}

// AuthenticateRequest authenticates req as the user its headers name when
// its peer chain is verified against the current requestheader CA (from the
// cache or now) and its leaf's common name is allowed; any other request —
// no certificate, a chain that fails, a name not allowed, no user header —
// goes to the delegating authenticator, which decides as it always did.
func (a *Authenticator) AuthenticateRequest(req *http.Request) (*authenticator.Response, bool, error) {
	if req.TLS == nil || len(req.TLS.PeerCertificates) == 0 || len(req.TLS.PeerCertificates) > maxChain {
		return a.next.AuthenticateRequest(req)
	}
	chain := req.TLS.PeerCertificates
	// The name first: a certificate not allowed takes no verification
	// and no place in the cache here.
	if !a.nameAllowed(chain[0].Subject.CommonName) || !a.verified(chain) {
		return a.next.AuthenticateRequest(req)
	}
	resp, ok, err := a.headers.AuthenticateRequest(req)
	if err != nil || !ok {
		return a.next.AuthenticateRequest(req)
	}
	return resp, true, nil
}

// verified reports whether chain[0] verifies against the current CA bundle,
// with chain[1:] as intermediates as k8s.io/apiserver's x509 verifier uses
// them. Only a success is remembered.
func (a *Authenticator) verified(chain []*x509.Certificate) bool {
	ca := a.ca.CurrentCABundleContent()
	if len(ca) == 0 {
		return false
	}
	key := cacheKey(ca, chain)
	if _, ok := a.cache.Get(key); ok {
		return true
	}
	opts, ok := a.ca.VerifyOptions()
	if !ok {
		return false
	}
	if opts.Intermediates == nil && len(chain) > 1 {
		opts.Intermediates = x509.NewCertPool()
		for _, c := range chain[1:] {
			opts.Intermediates.AddCert(c)
		}
	}
	now := a.clock.Now()
	if opts.CurrentTime.IsZero() {
		opts.CurrentTime = now
	}
	verifiedChains, err := a.verify(chain[0], opts)
	if err != nil {
		return false
	}
	// The bundle read for the key must be the one the options came from:
	// a rotation in between leaves this verification unremembered.
	if !bytes.Equal(ca, a.ca.CurrentCABundleContent()) {
		return true
	}
	ttl := min(a.ttl, earliestNotAfter(verifiedChains).Sub(now))
	if ttl > 0 {
		a.cache.Add(key, struct{}{}, ttl)
	}
	return true
}

// nameAllowed is k8s.io/apiserver's check of the front proxy's common name,
// run on every request against the current allowed names: empty allows all.
func (a *Authenticator) nameAllowed(cn string) bool {
	names := a.allowed.Value()
	return len(names) == 0 || slices.Contains(names, cn)
}

// key is the SHA-256 of the CA bundle then that of the presented chain.
type key [2 * sha256.Size]byte

func cacheKey(ca []byte, chain []*x509.Certificate) key {
	var k key
	caSum := sha256.Sum256(ca)
	copy(k[:sha256.Size], caSum[:])
	h := sha256.New()
	var n [8]byte
	for _, c := range chain {
		// Length-prefixed, so that no two chains hash the same bytes.
		binary.BigEndian.PutUint64(n[:], uint64(len(c.Raw)))
		h.Write(n[:])
		h.Write(c.Raw)
	}
	copy(k[sha256.Size:], h.Sum(nil))
	return k
}

// earliestNotAfter is the first expiry of any certificate of chains.
func earliestNotAfter(chains [][]*x509.Certificate) time.Time {
	var first time.Time
	for _, chain := range chains {
		for _, c := range chain {
			if first.IsZero() || c.NotAfter.Before(first) {
				first = c.NotAfter
			}
		}
	}
	return first
}
