package acmetest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mholt/acmez/v3"
	"github.com/mholt/acmez/v3/acme"
	"github.com/miekg/dns"
)

// solver answers every HTTP-01 challenge it was given, and records the
// hosts that asked.
type solver struct {
	mu    sync.Mutex
	chals map[string]acme.Challenge // by token
	hosts []string
}

func (s *solver) Present(_ context.Context, c acme.Challenge) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.chals[c.Token] = c
	return nil
}

func (s *solver) CleanUp(_ context.Context, c acme.Challenge) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.chals, c.Token)
	return nil
}

func (s *solver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hosts = append(s.hosts, r.Host)
	token, ok := strings.CutPrefix(r.URL.Path, "/.well-known/acme-challenge/")
	c, known := s.chals[token]
	if !ok || !known {
		http.NotFound(w, r)
		return
	}
	w.Write([]byte(c.KeyAuthorization))
}

func (s *solver) requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.hosts...)
}

// setup starts an HTTP-01 responder on 127.0.0.1 and a pebble validating
// against its port, and returns an ACME client with an account.
func setup(t *testing.T) (*Pebble, *solver, acmez.Client, acme.Account) {
	t.Helper()
	sol := &solver{chals: map[string]acme.Challenge{}}
	srv := httptest.NewServer(sol)
	t.Cleanup(srv.Close)
	port := srv.Listener.Addr().(*net.TCPAddr).Port

	p := Start(t, Options{HTTPPort: port})
	client := acmez.Client{
		Client: &acme.Client{
			Directory: p.DirectoryURL(),
			HTTPClient: &http.Client{
				Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: p.DirectoryCA()}},
				Timeout:   30 * time.Second,
			},
			PollTimeout: time.Minute,
		},
		ChallengeSolvers: map[string]acmez.Solver{acme.ChallengeTypeHTTP01: sol},
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	account, err := client.NewAccount(t.Context(), acme.Account{TermsOfServiceAgreed: true, PrivateKey: key})
	if err != nil {
		t.Fatalf("creating account: %v", err)
	}
	return p, sol, client, account
}

func TestObtainCertificateForNamePointedHere(t *testing.T) {
	p, sol, client, account := setup(t)
	const name = "app.pointed-here.test"
	p.SetA(name, "127.0.0.1")

	certKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	certs, err := client.ObtainCertificateForSANs(t.Context(), account, certKey, []string{name})
	if err != nil {
		t.Fatalf("obtaining a certificate for %s: %v", name, err)
	}

	chain, err := parsePEMCerts(certs[0].ChainPEM)
	if err != nil {
		t.Fatal(err)
	}
	roots, err := p.IssuerRoots(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	inter := x509.NewCertPool()
	for _, c := range chain[1:] {
		inter.AddCert(c)
	}
	if _, err := chain[0].Verify(x509.VerifyOptions{DNSName: name, Roots: roots, Intermediates: inter}); err != nil {
		t.Fatalf("issued certificate does not verify against pebble's root: %v", err)
	}
	// The directory's own CA is not pebble's issuer.
	if _, err := chain[0].Verify(x509.VerifyOptions{DNSName: name, Roots: p.DirectoryCA(), Intermediates: inter}); err == nil {
		t.Fatal("issued certificate verifies against the directory CA")
	}
	intermediates, err := p.Intermediates(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(chain) < 2 || !chain[1].Equal(intermediates[0]) {
		t.Fatalf("served chain's second certificate is not pebble's intermediate")
	}

	if n := p.Orders(name); n != 1 {
		t.Fatalf("Orders(%s) = %d, want 1\n%s", name, n, p.Log())
	}
	if n := p.Orders("other.test"); n != 0 {
		t.Fatalf("Orders(other.test) = %d, want 0", n)
	}
	if got := sol.requests(); len(got) == 0 || !strings.HasPrefix(got[0], name+":") {
		t.Fatalf("validation requests came for hosts %q, want %s", got, name)
	}
}

// TestOrderFailsForNameNotPointedHere places one order by hand per name and
// answers its HTTP-01 challenge; pebble must find no address for the name
// and mark the authorization invalid. (acmez's ObtainCertificate would retry
// with new orders.)
func TestOrderFailsForNameNotPointedHere(t *testing.T) {
	p, sol, client, account := setup(t)
	const cleared = "cleared.not-pointed-here.test"
	p.SetA(cleared, "127.0.0.1")
	p.ClearA(cleared)

	for _, name := range []string{"never.not-pointed-here.test", cleared} {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			order, err := client.NewOrder(ctx, account, acme.Order{
				Identifiers: []acme.Identifier{{Type: "dns", Value: name}},
			})
			if err != nil {
				t.Fatalf("placing an order for %s: %v", name, err)
			}
			authz, err := client.GetAuthorization(ctx, account, order.Authorizations[0])
			if err != nil {
				t.Fatal(err)
			}
			var chal *acme.Challenge
			for i := range authz.Challenges {
				if authz.Challenges[i].Type == acme.ChallengeTypeHTTP01 {
					chal = &authz.Challenges[i]
				}
			}
			if chal == nil {
				t.Fatalf("no http-01 challenge offered for %s", name)
			}
			if err := sol.Present(ctx, *chal); err != nil {
				t.Fatal(err)
			}
			if _, err := client.InitiateChallenge(ctx, account, *chal); err != nil {
				t.Fatalf("initiating the challenge: %v", err)
			}
			authz, err = client.PollAuthorization(ctx, account, authz)
			var problem acme.Problem
			if !errors.As(err, &problem) {
				t.Fatalf("authorization for %s: err = %v, want an ACME problem", name, err)
			}
			if authz.Status != acme.StatusInvalid {
				t.Errorf("authorization status %q, want invalid", authz.Status)
			}
			// Not found in DNS, rather than found and then refused.
			if problem.Type != acme.ProblemTypeConnection || !strings.Contains(problem.Detail, "could not resolve") {
				t.Errorf("problem %s: %s; want a connection problem: could not resolve", problem.Type, problem.Detail)
			}
			if n := p.Orders(name); n != 1 {
				t.Errorf("Orders(%s) = %d, want 1 (accepted, then invalid)", name, n)
			}
		})
	}
	if got := sol.requests(); len(got) != 0 {
		t.Fatalf("the responder was asked for %q; nothing should reach it", got)
	}
}

// TestDNSAnswersOnlySetNames checks the cause behind the test above:
// challtestsrv has no default address for A or AAAA queries.
func TestDNSAnswersOnlySetNames(t *testing.T) {
	p := Start(t, Options{})
	p.SetA("set.dns.test", "127.0.0.2")
	p.SetA("set.dns.test", "127.0.0.1") // replaces, does not add

	cases := []struct {
		name  string
		qtype uint16
		want  []string
	}{
		{"set.dns.test", dns.TypeA, []string{"127.0.0.1"}},
		{"unset.dns.test", dns.TypeA, nil},
		{"set.dns.test", dns.TypeAAAA, nil},
		{"unset.dns.test", dns.TypeAAAA, nil},
	}
	c := &dns.Client{Net: "tcp", Timeout: 5 * time.Second}
	for _, tc := range cases {
		m := new(dns.Msg)
		m.SetQuestion(dns.Fqdn(tc.name), tc.qtype)
		in, _, err := c.ExchangeContext(t.Context(), m, p.DNSAddr())
		if err != nil {
			t.Fatalf("querying %s: %v", tc.name, err)
		}
		var got []string
		for _, rr := range in.Answer {
			switch rr := rr.(type) {
			case *dns.A:
				got = append(got, rr.A.String())
			case *dns.AAAA:
				got = append(got, rr.AAAA.String())
			}
		}
		if strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Errorf("%s %s: answers %q, want %q", tc.name, dns.TypeToString[tc.qtype], got, tc.want)
		}
	}
}
