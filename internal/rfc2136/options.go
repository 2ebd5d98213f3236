package rfc2136

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/pflag"
)

// Options are the --acme-dns-rfc2136-* flags of bex-edge and bex-embedded:
// the DNS server and key that ACME DNS-01 challenges are published with.
// They are set all together or not at all.
type Options struct {
	Server, Zone, KeyName, SecretFile, Algorithm string

	secret string
}

// AddFlags binds the options to fs.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	if o.Algorithm == "" {
		o.Algorithm = DefaultAlgorithm
	}
	fs.StringVar(&o.Server, "acme-dns-rfc2136-server", o.Server, "host:port of the primary DNS server that takes RFC 2136 updates for --acme-dns-rfc2136-zone; set with the other --acme-dns-rfc2136-* flags, wildcard Routes get one wildcard certificate each by ACME DNS-01")
	fs.StringVar(&o.Zone, "acme-dns-rfc2136-zone", o.Zone, "Zone the DNS-01 challenge records are added to; wildcard Routes in it get wildcard certificates by DNS-01, others one certificate per name under --certificate-budget")
	fs.StringVar(&o.KeyName, "acme-dns-rfc2136-tsig-key", o.KeyName, "Name of the TSIG key the server allows to update the zone")
	fs.StringVar(&o.SecretFile, "acme-dns-rfc2136-tsig-secret-file", o.SecretFile, "File holding the TSIG key's secret, base64 as tsig-keygen prints it")
	fs.StringVar(&o.Algorithm, "acme-dns-rfc2136-tsig-algorithm", o.Algorithm, "TSIG algorithm of the key: hmac-sha1, hmac-sha224, hmac-sha256, hmac-sha384 or hmac-sha512")
}

// Configured reports whether any of the flags that name the server, zone,
// key or secret was given.
func (o *Options) Configured() bool {
	return o.Server != "" || o.Zone != "" || o.KeyName != "" || o.SecretFile != ""
}

// Complete reads the secret file, when one is named.
func (o *Options) Complete() error {
	if o.SecretFile == "" {
		return nil
	}
	data, err := os.ReadFile(o.SecretFile)
	if err != nil {
		return fmt.Errorf("reading --acme-dns-rfc2136-tsig-secret-file: %w", err)
	}
	o.secret = strings.TrimSpace(string(data))
	return nil
}

// Validate says what is wrong: flags given in part, or values the server
// would not take.
func (o *Options) Validate() error {
	if !o.Configured() {
		return nil
	}
	var missing []string
	for _, f := range []struct{ name, value string }{
		{"--acme-dns-rfc2136-server", o.Server}, {"--acme-dns-rfc2136-zone", o.Zone},
		{"--acme-dns-rfc2136-tsig-key", o.KeyName}, {"--acme-dns-rfc2136-tsig-secret-file", o.SecretFile},
	} {
		if f.value == "" {
			missing = append(missing, f.name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("DNS-01 by RFC 2136 needs all of --acme-dns-rfc2136-server, -zone, -tsig-key and -tsig-secret-file (or none); missing %s", strings.Join(missing, ", "))
	}
	if err := o.provider().Check(); err != nil {
		return fmt.Errorf("--acme-dns-rfc2136-*: %w", err)
	}
	return nil
}

// Provider returns the configured provider, or nil when the flags are not
// set. Complete and Validate must have succeeded.
func (o *Options) Provider() (*Provider, error) {
	if !o.Configured() {
		return nil, nil
	}
	p := o.provider()
	if err := p.Check(); err != nil {
		return nil, errors.Join(errors.New("--acme-dns-rfc2136-* are not validated"), err)
	}
	return p, nil
}

func (o *Options) provider() *Provider {
	return &Provider{Server: o.Server, Zone: o.Zone, KeyName: o.KeyName, Algorithm: o.Algorithm, Secret: o.secret}
}
