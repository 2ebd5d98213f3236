package domains_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"bex.co/bex/internal/dnstest"
	"bex.co/bex/internal/domains"
)

func TestCheck(t *testing.T) {
	p := domains.Policy{AppDomain: "apps.example.com:8443", Reserved: []string{"registry.example.com:5000", "*.bex.example.net"}}
	for _, tc := range []struct {
		host, reason, msg string
	}{
		{"www.example.com", "", ""},
		{"example.com", "", ""},
		{"*.example.co.uk", "", ""},
		{"www.example.co.uk", "", ""},
		{"shop-acme.apps.example.com", "", ""},
		{"*.shop.test", "", ""},
		{"api.registry.example.com", "", ""},
		{"*.co.uk", domains.ReasonNotRegistrable, "*.co.uk is a wildcard over co.uk, a public suffix"},
		{"co.uk", domains.ReasonNotRegistrable, "co.uk is a public suffix"},
		{"*.github.io", domains.ReasonNotRegistrable, "public suffix"},
		{"apps.example.com", domains.ReasonReserved, "apps.example.com is the platform's own"},
		{"*.apps.example.com", domains.ReasonReserved, "the platform's own"},
		{"*.example.com", domains.ReasonReserved, "*.example.com is the platform's own"},
		{"a.shop-acme.apps.example.com", domains.ReasonReserved, "only apps' default hostnames"},
		{"*.shop-acme.apps.example.com", domains.ReasonReserved, "only apps' default hostnames"},
		{"registry.example.com", domains.ReasonReserved, "the platform serves registry.example.com itself"},
		{"*.registry.example.com", domains.ReasonReserved, "reserved"},
		{"bex.example.net", domains.ReasonReserved, "the platform serves *.bex.example.net itself"},
		{"dashboard.bex.example.net", domains.ReasonReserved, "reserved"},
		{"*.bex.example.net", domains.ReasonReserved, "reserved"},
		{"*.example.net", domains.ReasonReserved, "reserved"},
	} {
		got := p.Check(tc.host)
		switch {
		case tc.reason == "" && got != nil:
			t.Errorf("Check(%s) = %s: %s, want nil", tc.host, got.Reason, got.Message)
		case tc.reason != "" && got == nil:
			t.Errorf("Check(%s) = nil, want %s", tc.host, tc.reason)
		case tc.reason != "" && (got.Reason != tc.reason || !strings.Contains(got.Message, tc.msg)):
			t.Errorf("Check(%s) = %s: %q, want %s with %q", tc.host, got.Reason, got.Message, tc.reason, tc.msg)
		}
	}
}

func TestDefaultHostnameApp(t *testing.T) {
	p := domains.Policy{AppDomain: "apps.example.com"}
	for _, tc := range []struct {
		tenant, host, app string
		ok                bool
	}{
		{"acme", "shop-acme.apps.example.com", "shop", true},
		{"acme", "my-shop-acme.apps.example.com", "my-shop", true},
		{"co", "shop-acme.apps.example.com", "", false},
		{"acme", "acme.apps.example.com", "", false},
		{"acme", "-acme.apps.example.com", "", false},
		{"acme", "shop-acme.example.com", "", false},
		{"acme", "x.shop-acme.apps.example.com", "", false},
	} {
		app, ok := p.DefaultHostnameApp(tc.tenant, tc.host)
		if app != tc.app || ok != tc.ok {
			t.Errorf("DefaultHostnameApp(%s, %s) = %q, %v; want %q, %v", tc.tenant, tc.host, app, ok, tc.app, tc.ok)
		}
	}
	if _, ok := (domains.Policy{}).DefaultHostnameApp("acme", "shop-acme.apps.example.com"); ok {
		t.Error("without an app domain, a name is a default hostname")
	}
}

func TestToken(t *testing.T) {
	a := domains.Token("apps.example.com", "acme", "www.example.com")
	if !strings.HasPrefix(a, "bex-verify=") || len(a) != len("bex-verify=")+32 {
		t.Errorf("token %q", a)
	}
	if b := domains.Token("apps.example.com:443", "acme", "WWW.example.com"); b != a {
		t.Errorf("the same inputs written otherwise give %q and %q", a, b)
	}
	for _, other := range []string{
		domains.Token("apps.example.com", "acme2", "www.example.com"),
		domains.Token("apps.example.com", "acme", "api.example.com"),
		domains.Token("apps.example.com", "acme", "*.www.example.com"),
		domains.Token("apps.other.com", "acme", "www.example.com"),
	} {
		if other == a {
			t.Errorf("token %q repeats for other inputs", a)
		}
	}
	if got := domains.ChallengeName("*.example.co.uk"); got != "_bex-challenge.example.co.uk" {
		t.Errorf("ChallengeName(*.example.co.uk) = %q", got)
	}
	if got := domains.ChallengeName("www.example.com"); got != "_bex-challenge.www.example.com" {
		t.Errorf("ChallengeName(www.example.com) = %q", got)
	}
}

// TestTXTValues looks records up through Go's resolver from a real DNS
// server on loopback.
func TestTXTValues(t *testing.T) {
	srv := dnstest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := domains.ResolverAt(srv.Addr())
	tok := domains.Token("apps.test", "acme", "www.example.test")
	vals, err := domains.TXTValues(ctx, r, "www.example.test")
	if err != nil || len(vals) != 0 {
		t.Fatalf("no record: %q, %v", vals, err)
	}
	long := strings.Repeat("x", 300)
	srv.SetTXT("_bex-challenge.www.example.test", "v=spf1 -all", " "+tok+" ", long)
	vals, err = domains.TXTValues(ctx, r, "www.example.test")
	if err != nil {
		t.Fatal(err)
	}
	if !domains.Verified(vals, "apps.test", "acme", "www.example.test") {
		t.Errorf("values %q do not verify acme", vals)
	}
	if domains.Verified(vals, "apps.test", "evil", "www.example.test") {
		t.Errorf("values %q verify another tenant", vals)
	}
	srv.SetTXT("_bex-challenge.example.test", tok)
	if vals, _ := domains.TXTValues(ctx, r, "*.example.test"); domains.Verified(vals, "apps.test", "acme", "*.example.test") {
		t.Error("the token of www.example.test verifies *.example.test")
	}
	if _, err := domains.TXTValues(ctx, domains.ResolverAt("127.0.0.1:1"), "www.example.test"); err == nil {
		t.Error("a resolver that does not answer gives no error")
	}
}

func TestOverlap(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"www.example.com", "www.example.com", true},
		{"*.example.com", "www.example.com", true},
		{"www.example.com", "*.example.com", true},
		{"*.example.com", "*.example.com", true},
		{"*.example.com", "example.com", false},
		{"*.example.com", "a.b.example.com", false},
		{"*.example.com", "*.b.example.com", false},
		{"www.example.com", "www.example.org", false},
		{"*.", "com", false},
	} {
		if got := domains.Overlap(tc.a, tc.b); got != tc.want {
			t.Errorf("Overlap(%q, %q) = %v", tc.a, tc.b, got)
		}
	}
}
