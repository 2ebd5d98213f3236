package rfc2136_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/libdns/libdns"
	"github.com/miekg/dns"
	"github.com/spf13/pflag"

	"bex.co/bex/internal/dnstest"
	"bex.co/bex/internal/rfc2136"
)

func newSecret(t *testing.T) string {
	t.Helper()
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(b)
}

// TestProvider adds and deletes challenge records in a real DNS server that
// takes signed updates for the zone, and checks that the server refuses
// updates with a wrong secret, an unknown key, another key's zone and no
// key at all, leaving its records as they were.
func TestProvider(t *testing.T) {
	ctx := context.Background()
	srv := dnstest.Start(t)
	secret, other := newSecret(t), newSecret(t)
	srv.AcceptUpdates("example.test", dnstest.Key{Name: "edge-key", Secret: secret})
	srv.AcceptUpdates("other.test", dnstest.Key{Name: "other-key", Secret: other})
	p := &rfc2136.Provider{Server: srv.Addr(), Zone: "example.test.", KeyName: "edge-key", Secret: secret}
	if err := p.Check(); err != nil {
		t.Fatal(err)
	}
	const name = "_acme-challenge.example.test"

	// certmagic passes the zone it found and a name relative to it.
	got, err := p.AppendRecords(ctx, "example.test.", []libdns.Record{
		libdns.TXT{Name: "_acme-challenge", Text: "token-1"},
		libdns.TXT{Name: "_acme-challenge", Text: "token-2"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].(libdns.TXT).Text != "token-1" {
		t.Errorf("AppendRecords returned %#v", got)
	}
	if v := srv.TXT(name); !slices.Equal(v, []string{"token-1", "token-2"}) {
		t.Fatalf("TXT %s = %q after appending", name, v)
	}
	// A long value crosses the 255-byte string limit of a TXT record.
	long := strings.Repeat("x", 300)
	if _, err := p.AppendRecords(ctx, "example.test.", []libdns.Record{libdns.TXT{Name: "long", Text: long}}); err != nil {
		t.Fatal(err)
	}
	if v := srv.TXT("long.example.test"); !slices.Equal(v, []string{long}) {
		t.Errorf("long TXT = %q", v)
	}

	if _, err := p.DeleteRecords(ctx, "example.test.", []libdns.Record{libdns.TXT{Name: "_acme-challenge", Text: "token-1"}}); err != nil {
		t.Fatal(err)
	}
	if v := srv.TXT(name); !slices.Equal(v, []string{"token-2"}) {
		t.Fatalf("TXT %s = %q after deleting token-1", name, v)
	}
	// No data deletes every TXT record of the name.
	if _, err := p.DeleteRecords(ctx, "example.test.", []libdns.Record{libdns.RR{Name: "_acme-challenge", Type: "TXT"}}); err != nil {
		t.Fatal(err)
	}
	if v := srv.TXT(name); len(v) != 0 {
		t.Fatalf("TXT %s = %q after deleting the set", name, v)
	}

	// A record outside the zone is refused before anything is sent.
	if _, err := p.AppendRecords(ctx, "other.test.", []libdns.Record{libdns.TXT{Name: "_acme-challenge", Text: "x"}}); err == nil || !strings.Contains(err.Error(), "not in zone example.test.") {
		t.Errorf("a record outside the zone: %v", err)
	}

	srv.SetTXT(name, "kept")
	for _, c := range []struct {
		what string
		p    rfc2136.Provider
		want string
	}{
		{"a wrong secret", rfc2136.Provider{Server: srv.Addr(), Zone: "example.test", KeyName: "edge-key", Secret: other}, "NOTAUTH"},
		{"an unknown key", rfc2136.Provider{Server: srv.Addr(), Zone: "example.test", KeyName: "nobody", Secret: secret}, "NOTAUTH"},
		{"another zone's key", rfc2136.Provider{Server: srv.Addr(), Zone: "example.test", KeyName: "other-key", Secret: other}, "REFUSED"},
		{"a wrong algorithm", rfc2136.Provider{Server: srv.Addr(), Zone: "example.test", KeyName: "edge-key", Secret: secret, Algorithm: "hmac-sha512"}, "NOTAUTH"},
	} {
		for _, op := range []func(context.Context, string, []libdns.Record) ([]libdns.Record, error){c.p.AppendRecords, c.p.DeleteRecords} {
			_, err := op(ctx, "example.test.", []libdns.Record{libdns.TXT{Name: "_acme-challenge", Text: "kept"}})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("an update with %s: %v, want %s", c.what, err, c.want)
			}
		}
		if v := srv.TXT(name); !slices.Equal(v, []string{"kept"}) {
			t.Errorf("after updates with %s, TXT %s = %q", c.what, name, v)
		}
	}
}

// TestUnsignedUpdateRefused sends an update without a key, as anyone on
// the network could: the server refuses it.
func TestUnsignedUpdateRefused(t *testing.T) {
	srv := dnstest.Start(t)
	srv.AcceptUpdates("example.test", dnstest.Key{Name: "edge-key", Secret: newSecret(t)})
	rr, err := dns.NewRR("_acme-challenge.example.test. 0 IN TXT forged")
	if err != nil {
		t.Fatal(err)
	}
	m := new(dns.Msg)
	m.SetUpdate("example.test.")
	m.Insert([]dns.RR{rr})
	resp, _, err := (&dns.Client{Net: "tcp"}).Exchange(m, srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	if resp.Rcode != dns.RcodeRefused {
		t.Errorf("an unsigned update was answered %s, want REFUSED", dns.RcodeToString[resp.Rcode])
	}
	if v := srv.TXT("_acme-challenge.example.test"); len(v) != 0 {
		t.Errorf("an unsigned update added TXT %q", v)
	}
}

// TestOptions checks the flags: none is fine, some is an error that names
// the missing ones, and a full set gives a provider.
func TestOptions(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	bad := filepath.Join(dir, "bad")
	if err := os.WriteFile(good, []byte(newSecret(t)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("not base64!\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args    []string
		wantErr string // empty: valid
		want    bool   // a provider
	}{
		{nil, "", false},
		{[]string{"--acme-dns-rfc2136-server", "ns1.example.test:53"}, "missing --acme-dns-rfc2136-zone, --acme-dns-rfc2136-tsig-key, --acme-dns-rfc2136-tsig-secret-file", false},
		{[]string{"--acme-dns-rfc2136-server", "ns1.example.test:53", "--acme-dns-rfc2136-zone", "example.test",
			"--acme-dns-rfc2136-tsig-key", "edge", "--acme-dns-rfc2136-tsig-secret-file", good}, "", true},
		{[]string{"--acme-dns-rfc2136-server", "ns1.example.test", "--acme-dns-rfc2136-zone", "example.test",
			"--acme-dns-rfc2136-tsig-key", "edge", "--acme-dns-rfc2136-tsig-secret-file", bad, "--acme-dns-rfc2136-tsig-algorithm", "hmac-md5"},
			"not host:port", false},
		{[]string{"--acme-dns-rfc2136-server", "ns1.example.test:53", "--acme-dns-rfc2136-zone", "example.test",
			"--acme-dns-rfc2136-tsig-key", "edge", "--acme-dns-rfc2136-tsig-secret-file", bad}, "not base64", false},
		{[]string{"--acme-dns-rfc2136-server", "ns1.example.test:53", "--acme-dns-rfc2136-zone", "example.test",
			"--acme-dns-rfc2136-tsig-key", "edge", "--acme-dns-rfc2136-tsig-secret-file", good, "--acme-dns-rfc2136-tsig-algorithm", "hmac-md5"}, `"hmac-md5" is not one of`, false},
	} {
		var o rfc2136.Options
		fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
		o.AddFlags(fs)
		if err := fs.Parse(c.args); err != nil {
			t.Fatal(err)
		}
		err := o.Complete()
		if err == nil {
			err = o.Validate()
		}
		switch {
		case c.wantErr == "" && err != nil:
			t.Errorf("%v: %v", c.args, err)
		case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
			t.Errorf("%v: error %v, want one saying %q", c.args, err, c.wantErr)
		case err == nil:
			p, err := o.Provider()
			if err != nil || (p != nil) != c.want {
				t.Errorf("%v: provider %v, %v", c.args, p, err)
			}
		}
	}
}
