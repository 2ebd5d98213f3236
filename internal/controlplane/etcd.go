package controlplane

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"bex.co/bex/internal/childproc"
	"bex.co/bex/internal/kubebin"
	"bex.co/bex/internal/pki"
)

// EtcdClientName is the common name of the certificate the apiservers
// present to etcd.
const EtcdClientName = "kube-apiserver-etcd-client"

// EtcdOptions configures one etcd of one member, as a control plane or an
// external etcd cluster of a Cluster API cluster has.
type EtcdOptions struct {
	// Binary is the etcd program (kubebin.Builder.Etcd).
	Binary string
	// DataDir keeps etcd's data.
	DataDir string
	// PKIDir keeps etcd's CA and its certificates (etcd-ca, etcd-server,
	// etcd-peer, etcd-client); what is missing is issued.
	PKIDir string
	// LogFile receives etcd's output.
	LogFile string
	// ClientAddr and PeerAddr are the host:port etcd listens on for
	// clients and for peers. The host must be an IP address.
	ClientAddr, PeerAddr string
	// Fsync makes etcd sync to disk.
	Fsync bool
	// StartTimeout bounds how long etcd may take to answer /health. Zero
	// means two minutes.
	StartTimeout time.Duration
	// Log receives what StartEtcd does. Nil discards.
	Log io.Writer
}

// Etcd is a running etcd member. It speaks TLS only, to clients and peers,
// and answers only those that present a certificate of its own CA.
type Etcd struct {
	url string

	proc   *childproc.Process
	ca     *keyPair
	client *keyPair // what the apiservers present to etcd
}

// StartEtcd issues etcd's certificates when missing, starts etcd and waits
// until it answers /health.
func StartEtcd(ctx context.Context, opts EtcdOptions) (_ *Etcd, err error) {
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	if opts.StartTimeout == 0 {
		opts.StartTimeout = 2 * time.Minute
	}
	host, _, err := net.SplitHostPort(opts.ClientAddr)
	if err != nil {
		return nil, fmt.Errorf("etcd client address %q: %w", opts.ClientAddr, err)
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return nil, fmt.Errorf("etcd client address %q: the host must be an IP address", opts.ClientAddr)
	}
	for _, d := range []string{opts.DataDir, opts.PKIDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
	}
	e := &Etcd{url: "https://" + opts.ClientAddr}
	server, peerKP, err := e.loadOrCreatePKI(opts.PKIDir, ip)
	if err != nil {
		return nil, err
	}
	peer := "https://" + opts.PeerAddr
	argv := []string{opts.Binary,
		"--name=bex",
		"--data-dir=" + opts.DataDir,
		"--listen-client-urls=" + e.url,
		"--advertise-client-urls=" + e.url,
		"--listen-peer-urls=" + peer,
		"--initial-advertise-peer-urls=" + peer,
		"--initial-cluster=bex=" + peer,
		// Clients and peers alike present a certificate of etcd's own CA.
		"--cert-file=" + server.CertFile,
		"--key-file=" + server.KeyFile,
		"--client-cert-auth=true",
		"--trusted-ca-file=" + e.ca.CertFile,
		"--peer-cert-file=" + peerKP.CertFile,
		"--peer-key-file=" + peerKP.KeyFile,
		"--peer-client-cert-auth=true",
		"--peer-trusted-ca-file=" + e.ca.CertFile,
		"--log-level=warn",
	}
	if !opts.Fsync {
		argv = append(argv, "--unsafe-no-fsync=true")
	}
	fmt.Fprintf(opts.Log, "starting etcd v%s on %s (client certificates required)\n", kubebin.EtcdVersion, e.url)
	if e.proc, err = childproc.Start(childproc.Options{Name: "etcd", Args: argv, LogFile: opts.LogFile, LogMode: 0o644}); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			e.Stop(10 * time.Second)
		}
	}()
	ctx, cancel := context.WithTimeout(ctx, opts.StartTimeout)
	defer cancel()
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: e.TLSConfig()}}
	if err := e.proc.WaitReady(ctx, "etcd", 200*time.Millisecond, func(ctx context.Context) error {
		return childproc.HTTPOK(ctx, client, e.url+"/health")
	}); err != nil {
		return nil, err
	}
	if err := e.advertisePeerURL(ctx, client, peer, opts.Log); err != nil {
		return nil, err
	}
	return e, nil
}

// loadOrCreatePKI reads etcd's CA and certificates in dir, issuing what is
// missing, and a serving or peer certificate that does not cover ip anew.
func (e *Etcd) loadOrCreatePKI(dir string, ip net.IP) (server, peer *keyPair, err error) {
	if e.ca, err = loadOrCreate(dir, "etcd-ca", nil, pki.Spec{CommonName: "bex-etcd-ca"}); err != nil {
		return nil, nil, err
	}
	ips := []net.IP{net.ParseIP("127.0.0.1")}
	if !ip.Equal(ips[0]) {
		ips = append(ips, ip)
	}
	// etcd's gRPC gateway (the JSON API) dials etcd with the serving
	// certificate, which is therefore a client certificate too, as kubeadm
	// issues it.
	both := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	if server, err = loadOrReissue(dir, "etcd-server", e.ca, pki.Spec{
		CommonName: "etcd", DNSNames: []string{"localhost"}, IPAddresses: ips, ExtKeyUsage: both,
	}); err != nil {
		return nil, nil, err
	}
	if peer, err = loadOrReissue(dir, "etcd-peer", e.ca, pki.Spec{
		CommonName: "etcd-peer", DNSNames: []string{"localhost"}, IPAddresses: ips, ExtKeyUsage: both,
	}); err != nil {
		return nil, nil, err
	}
	if e.client, err = loadOrCreate(dir, "etcd-client", e.ca, clientSpec(EtcdClientName)); err != nil {
		return nil, nil, err
	}
	return server, peer, nil
}

// loadOrReissue is loadOrCreate that issues the certificate anew when the
// one on disk does not cover spec (it lacks a name or an address).
func loadOrReissue(dir, name string, signer *keyPair, spec pki.Spec) (*keyPair, error) {
	kp, err := loadOrCreate(dir, name, signer, spec)
	if err != nil || pki.Covers(kp.Cert, spec) {
		return kp, err
	}
	if err := os.Remove(kp.CertFile); err != nil {
		return nil, fmt.Errorf("replacing %s: %w", kp.CertFile, err)
	}
	return loadOrCreate(dir, name, signer, spec)
}

// URL returns etcd's client URL.
func (e *Etcd) URL() string { return e.url }

// ClientFiles returns the files a client of etcd needs, as kube-apiserver's
// --etcd-cafile, --etcd-certfile and --etcd-keyfile take them: the CA that
// signed etcd's serving certificate, and a client certificate and key etcd
// accepts.
func (e *Etcd) ClientFiles() (caFile, certFile, keyFile string) {
	return e.ca.CertFile, e.client.CertFile, e.client.KeyFile
}

// CACertPEM returns etcd's CA certificate.
func (e *Etcd) CACertPEM() []byte { return e.ca.CertPEM() }

// ClientPEM returns the client certificate and key etcd accepts.
func (e *Etcd) ClientPEM() (certPEM, keyPEM []byte, err error) {
	keyPEM, err = e.client.KeyPEM()
	return e.client.CertPEM(), keyPEM, err
}

// TLSConfig returns a TLS configuration that trusts etcd's CA and presents
// the etcd client certificate.
func (e *Etcd) TLSConfig() *tls.Config {
	return &tls.Config{
		RootCAs:      e.ca.Pool(),
		Certificates: []tls.Certificate{e.client.TLSCertificate()},
	}
}

// Running reports whether etcd's process is alive.
func (e *Etcd) Running() bool { return e.proc != nil && !e.proc.Exited() }

// PID returns etcd's process ID.
func (e *Etcd) PID() int { return e.proc.PID() }

// Stop stops etcd: SIGTERM, then SIGKILL after grace.
func (e *Etcd) Stop(grace time.Duration) {
	if e.proc != nil {
		e.proc.Stop(grace)
	}
}

// advertisePeerURL makes the member's recorded peer URL peer: etcd ignores
// --initial-advertise-peer-urls once it has data, so a member made when
// peers spoke plain HTTP would go on advertising http://.
func (e *Etcd) advertisePeerURL(ctx context.Context, client *http.Client, peer string, log io.Writer) error {
	type member struct {
		ID       string   `json:"ID"`
		PeerURLs []string `json:"peerURLs"`
	}
	var list struct {
		Members []member `json:"members"`
	}
	if err := etcdCall(ctx, client, e.url+"/v3/cluster/member/list", struct{}{}, &list); err != nil {
		return fmt.Errorf("listing etcd members: %w", err)
	}
	for _, m := range list.Members {
		if slices.Equal(m.PeerURLs, []string{peer}) {
			continue
		}
		if err := etcdCall(ctx, client, e.url+"/v3/cluster/member/update", member{ID: m.ID, PeerURLs: []string{peer}}, nil); err != nil {
			return fmt.Errorf("updating etcd member's peer URL to %s: %w", peer, err)
		}
		fmt.Fprintf(log, "etcd member's peer URL %v changed to %s\n", m.PeerURLs, peer)
	}
	return nil
}

// etcdCall posts in as JSON to an endpoint of etcd's JSON API and decodes
// the answer into out (unless nil).
func etcdCall(ctx context.Context, client *http.Client, url string, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %d %s", url, resp.StatusCode, strings.TrimSpace(string(data)))
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(data, out)
}
