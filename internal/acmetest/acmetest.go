package acmetest

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"bex.co/bex/internal/childproc"
	"bex.co/bex/internal/kubebin"
)

// Options configures the pebble a test starts.
type Options struct {
	// HTTPPort is the port pebble sends HTTP-01 validation requests to, on
	// the address a name's A record gives: where the server under test
	// listens for plain HTTP. Zero means no HTTP-01 validation can succeed.
	HTTPPort int
	// TLSPort is the same for TLS-ALPN-01. Zero means no TLS-ALPN-01
	// validation can succeed.
	TLSPort int
	// Binaries builds or finds pebble and pebble-challtestsrv. Nil means a
	// kubebin.Builder with the default cache directory, reporting build
	// progress to the test log.
	Binaries *kubebin.Builder
	// StartTimeout bounds how long the servers may take to answer once
	// started (not the build). Zero means 30 seconds.
	StartTimeout time.Duration
	// DNSServer, when set, is the host:port (UDP and TCP) of the DNS
	// server pebble resolves names with, such as a dnstest.Server that
	// takes the DNS-01 challenges' updates; pebble-challtestsrv is then not
	// started, and SetA, AddTXT and ClearA fail the test: records are set
	// at DNSServer. Empty means challtestsrv.
	DNSServer string
}

// Pebble is a running pebble ACME server with pebble-challtestsrv as its DNS
// server, both child processes of the test. Its methods must be called from
// the goroutine running the test, since they fail the test on error.
type Pebble struct {
	t       testing.TB
	dir     string
	certs   *directoryCerts
	log     *logBuffer
	orders  *orderCounter
	client  *http.Client // trusts the directory CA
	proxy   *http.Server
	procs   []*process
	stopped bool

	directoryURL    string
	managementURL   string
	challtestsrvURL string
	dnsAddr         string
	ownDNS          bool // dnsAddr is Options.DNSServer
}

// maxStartAttempts bounds the retries when a port picked as free was taken
// before the server bound it.
const maxStartAttempts = 3

// Start runs pebble and pebble-challtestsrv for t on 127.0.0.1, building
// them first when the cache lacks them, and returns once both answer. They
// are stopped when t ends; if t failed, the tail of their log is printed.
func Start(t testing.TB, opts Options) *Pebble {
	t.Helper()
	if opts.StartTimeout == 0 {
		opts.StartTimeout = 30 * time.Second
	}
	if opts.Binaries == nil {
		b, err := kubebin.NewBuilder(kubebin.Options{Progress: testWriter{t}})
		if err != nil {
			t.Fatalf("acmetest: %v", err)
		}
		opts.Binaries = b
	}
	pebbleBin, err := opts.Binaries.Tool(t.Context(), kubebin.Pebble)
	if err != nil {
		t.Fatalf("acmetest: %v", err)
	}
	challBin, err := opts.Binaries.Tool(t.Context(), kubebin.PebbleChallTestSrv)
	if err != nil {
		t.Fatalf("acmetest: %v", err)
	}

	p := &Pebble{t: t, dir: t.TempDir(), log: &logBuffer{}}
	t.Cleanup(p.cleanup)
	if p.certs, err = newDirectoryCerts(p.dir); err != nil {
		t.Fatalf("acmetest: %v", err)
	}
	p.client = &http.Client{
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: p.certs.ca.Pool()}},
		Timeout:   10 * time.Second,
	}
	for attempt := 1; ; attempt++ {
		ctx, cancel := context.WithTimeout(t.Context(), opts.StartTimeout)
		err := p.start(ctx, opts, pebbleBin, challBin)
		cancel()
		if err == nil {
			return p
		}
		p.stop()
		if attempt < maxStartAttempts && errors.Is(err, errPortTaken) {
			fmt.Fprintf(p.log, "acmetest: attempt %d: %v; retrying with other ports\n", attempt, err)
			continue
		}
		t.Fatalf("acmetest: starting pebble: %v", err) // cleanup prints the log
	}
}

var errPortTaken = errors.New("a port was taken by someone else")

// start starts the two servers and the proxy on fresh ports and waits until
// they answer.
func (p *Pebble) start(ctx context.Context, opts Options, pebbleBin, challBin string) error {
	p.stopped = false
	dnsPort, ports, err := freePorts(3)
	if err != nil {
		return err
	}
	p.dnsAddr = net.JoinHostPort("127.0.0.1", strconv.Itoa(dnsPort))
	challMgmt := net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))
	pebbleAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[1]))
	pebbleMgmt := net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[2]))
	p.challtestsrvURL = "http://" + challMgmt
	p.managementURL = "https://" + pebbleMgmt

	if p.ownDNS = opts.DNSServer != ""; p.ownDNS {
		p.dnsAddr = opts.DNSServer
	} else {
		// challtestsrv serves DNS only: its own challenge responders would
		// answer for the server under test, and its default answers
		// (127.0.0.1 and ::1 for every name) would make every name point
		// here.
		chall, err := p.spawn(challBin, []string{
			"-management", challMgmt,
			"-dnsserver", p.dnsAddr,
			"-http01=", "-https01=", "-tlsalpn01=", "-doh=",
			"-defaultIPv4=", "-defaultIPv6=",
		}, nil)
		if err != nil {
			return err
		}
		p.procs = append(p.procs, chall)
	}

	config := filepath.Join(p.dir, "pebble-config.json")
	if err := p.writeConfig(config, opts, pebbleAddr, pebbleMgmt); err != nil {
		return err
	}
	peb, err := p.spawn(pebbleBin, []string{"-config", config, "-dnsserver", p.dnsAddr}, []string{
		"PEBBLE_VA_NOSLEEP=1",      // validate at once
		"PEBBLE_VA_ALWAYS_VALID=0", // really validate
		"PEBBLE_WFE_NONCEREJECT=0", // accept every good nonce
		"PEBBLE_AUTHZREUSE=0",      // new authorizations for a new order (99 times in 100)
		"PEBBLE_ALTERNATE_ROOTS=0", // one root
		"PEBBLE_CHAIN_LENGTH=1",    // root → intermediate → leaf
	})
	if err != nil {
		return err
	}
	p.procs = append(p.procs, peb)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("listening for the directory proxy: %w", err)
	}
	p.orders = newOrderCounter(&url.URL{Scheme: "https", Host: pebbleAddr}, p.client.Transport, p.log)
	p.proxy = &http.Server{
		Handler:           p.orders,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{p.certs.serving.TLSCertificate()}},
		ErrorLog:          log.New(p.log, "acmetest proxy: ", 0),
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() { _ = p.proxy.ServeTLS(ln, "", "") }()
	p.directoryURL = "https://" + ln.Addr().String() + "/dir"

	return p.waitReady(ctx)
}

func (p *Pebble) writeConfig(path string, opts Options, listen, management string) error {
	type profile struct {
		Description    string `json:"description"`
		ValidityPeriod uint64 `json:"validityPeriod"`
	}
	var c struct {
		Pebble struct {
			ListenAddress                  string             `json:"listenAddress"`
			ManagementListenAddress        string             `json:"managementListenAddress"`
			Certificate                    string             `json:"certificate"`
			PrivateKey                     string             `json:"privateKey"`
			HTTPPort                       int                `json:"httpPort"`
			TLSPort                        int                `json:"tlsPort"`
			OCSPResponderURL               string             `json:"ocspResponderURL"`
			ExternalAccountBindingRequired bool               `json:"externalAccountBindingRequired"`
			KeyAlgorithm                   string             `json:"keyAlgorithm"`
			Profiles                       map[string]profile `json:"profiles"`
			RetryAfter                     struct {
				Authz int `json:"authz"`
				Order int `json:"order"`
			} `json:"retryAfter"`
		} `json:"pebble"`
	}
	c.Pebble.ListenAddress = listen
	c.Pebble.ManagementListenAddress = management
	c.Pebble.Certificate = p.certs.files.CertFile
	c.Pebble.PrivateKey = p.certs.files.KeyFile
	c.Pebble.HTTPPort = opts.HTTPPort
	c.Pebble.TLSPort = opts.TLSPort
	c.Pebble.KeyAlgorithm = "ecdsa"
	// One profile: with several, pebble picks one at random for orders that
	// name none.
	c.Pebble.Profiles = map[string]profile{"default": {Description: "acmetest", ValidityPeriod: 90 * 24 * 3600}}
	data, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding pebble config: %w", err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return fmt.Errorf("writing pebble config: %w", err)
	}
	return nil
}

// waitReady polls until challtestsrv's management API and DNS port, pebble's
// directory (through the proxy) and pebble's management interface answer.
func (p *Pebble) waitReady(ctx context.Context) error {
	type check struct {
		what string
		ok   func() bool
	}
	checks := []check{
		{"pebble directory", func() bool { return p.status(ctx, p.directoryURL) == http.StatusOK }},
		{"pebble management interface", func() bool { return p.status(ctx, p.managementURL+"/roots/0") == http.StatusOK }},
	}
	if !p.ownDNS {
		checks = append([]check{
			{"challtestsrv management API", func() bool { return p.answers(ctx, p.challtestsrvURL+"/") }},
			{"challtestsrv DNS", func() bool { return p.dnsAnswers(ctx) }},
		}, checks...)
	}
	portTaken := func() bool { return strings.Contains(p.log.String(), "address already in use") }
	ticker := time.NewTicker(50 * time.Millisecond)
	defer ticker.Stop()
	for _, c := range checks {
		for !c.ok() {
			if portTaken() {
				return errPortTaken
			}
			for _, pr := range p.procs {
				select {
				case <-pr.done:
					return fmt.Errorf("%s exited while starting: %v", filepath.Base(pr.cmd.Path), pr.err)
				default:
				}
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("waiting for the %s: %w", c.what, ctx.Err())
			case <-ticker.C:
			}
		}
	}
	// A server that lost its port to someone else may leave a check
	// answered by that someone.
	if portTaken() {
		return errPortTaken
	}
	return nil
}

// readinessName is the name the DNS check resolves.
const readinessName = "readiness.acmetest.invalid"

// dnsAnswers reports whether challtestsrv's DNS server answers, over TCP as
// pebble asks, an A query for readinessName with the record set through the
// management API (so both are the same challtestsrv).
func (p *Pebble) dnsAnswers(ctx context.Context) bool {
	err := p.challtestsrv(ctx, "/add-a", map[string]any{"host": readinessName, "addresses": []string{"127.0.0.1"}})
	if err != nil {
		return false
	}
	defer func() { _ = p.challtestsrv(ctx, "/clear-a", map[string]any{"host": readinessName}) }()
	r := &net.Resolver{
		PreferGo: true,
		Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", p.dnsAddr)
		},
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	ips, err := r.LookupIP(ctx, "ip4", readinessName)
	return err == nil && len(ips) == 1 && ips[0].Equal(net.IPv4(127, 0, 0, 1))
}

// answers reports whether an HTTP server answers at u with any status.
func (p *Pebble) answers(ctx context.Context, u string) bool { return p.status(ctx, u) != 0 }

// status returns the status of GET u, or 0 when there is no answer.
func (p *Pebble) status(ctx context.Context, u string) int {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return 0
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// DirectoryURL returns the URL of the ACME directory.
func (p *Pebble) DirectoryURL() string { return p.directoryURL }

// DirectoryCA returns a pool holding the CA of the certificate the ACME
// directory is served with, for the ACME client under test to trust.
func (p *Pebble) DirectoryCA() *x509.CertPool { return p.certs.ca.Pool() }

// DirectoryCAFile returns the path of that CA certificate as a PEM file.
func (p *Pebble) DirectoryCAFile() string { return p.certs.caFile }

// DNSAddr returns the host:port of the DNS server pebble resolves names with
// (UDP and TCP): Options.DNSServer, or challtestsrv, which answers A
// queries only for names given to SetA, and TXT queries for names given to
// AddTXT.
func (p *Pebble) DNSAddr() string { return p.dnsAddr }

// needChalltestsrv fails the test when pebble resolves with
// Options.DNSServer, where challtestsrv's records would not be seen.
func (p *Pebble) needChalltestsrv(what string) {
	p.t.Helper()
	if p.ownDNS {
		p.t.Fatalf("acmetest: %s: pebble resolves names with %s (Options.DNSServer); set the record there", what, p.dnsAddr)
	}
}

// SetA makes host resolve to ip (an IPv4 address) for pebble, replacing
// any address set before.
func (p *Pebble) SetA(host, ip string) {
	p.t.Helper()
	p.needChalltestsrv("SetA " + host)
	if err := p.challtestsrv(p.t.Context(), "/clear-a", map[string]any{"host": host}); err != nil {
		p.t.Fatalf("acmetest: clearing A record of %s: %v", host, err)
	}
	if err := p.challtestsrv(p.t.Context(), "/add-a", map[string]any{"host": host, "addresses": []string{ip}}); err != nil {
		p.t.Fatalf("acmetest: setting A record of %s: %v", host, err)
	}
}

// AddTXT adds a TXT record with value at name (beside any there), as a
// domain's owner would publish a verification token.
func (p *Pebble) AddTXT(name, value string) {
	p.t.Helper()
	p.needChalltestsrv("AddTXT " + name)
	if err := p.challtestsrv(p.t.Context(), "/set-txt", map[string]any{"host": strings.TrimSuffix(name, ".") + ".", "value": value}); err != nil {
		p.t.Fatalf("acmetest: adding TXT record of %s: %v", name, err)
	}
}

// ClearA removes host's A record, so that it no longer resolves and
// validations for it fail.
func (p *Pebble) ClearA(host string) {
	p.t.Helper()
	p.needChalltestsrv("ClearA " + host)
	if err := p.challtestsrv(p.t.Context(), "/clear-a", map[string]any{"host": host}); err != nil {
		p.t.Fatalf("acmetest: clearing A record of %s: %v", host, err)
	}
}

func (p *Pebble) challtestsrv(ctx context.Context, path string, body any) error {
	data, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.challtestsrvURL+path, bytes.NewReader(data))
	if err != nil {
		return err
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		return fmt.Errorf("challtestsrv %s: %s %s", path, resp.Status, bytes.TrimSpace(msg))
	}
	return nil
}

// IssuerRoots returns a pool holding the root pebble issues certificates
// under, from its management interface. Certificates verify against it only
// when their intermediate is served with them (or taken from Intermediates).
func (p *Pebble) IssuerRoots(ctx context.Context) (*x509.CertPool, error) {
	certs, err := p.managementCerts(ctx, "/roots/0")
	if err != nil {
		return nil, fmt.Errorf("fetching pebble's root: %w", err)
	}
	pool := x509.NewCertPool()
	for _, c := range certs {
		pool.AddCert(c)
	}
	return pool, nil
}

// Intermediates returns the intermediate certificates pebble issues from.
func (p *Pebble) Intermediates(ctx context.Context) ([]*x509.Certificate, error) {
	certs, err := p.managementCerts(ctx, "/intermediates/0")
	if err != nil {
		return nil, fmt.Errorf("fetching pebble's intermediates: %w", err)
	}
	return certs, nil
}

func (p *Pebble) managementCerts(ctx context.Context, path string) ([]*x509.Certificate, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.managementURL+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	certs, err := parsePEMCerts(data)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", path, err)
	}
	return certs, nil
}

// parsePEMCerts returns the certificates of a PEM bundle, in order; at
// least one.
func parsePEMCerts(data []byte) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			break
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("parsing certificate: %w", err)
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		return nil, errors.New("no certificate in PEM data")
	}
	return certs, nil
}

// Orders returns how many orders naming the DNS name pebble has accepted
// (answered 201 Created) so far, whether or not they were then validated.
func (p *Pebble) Orders(name string) int { return p.orders.count(name) }

// Log returns what pebble, pebble-challtestsrv and the harness have logged,
// for failure messages.
func (p *Pebble) Log() string { return p.log.String() }

func (p *Pebble) cleanup() {
	if p.t.Failed() {
		p.t.Logf("acmetest: last lines of the pebble log:\n%s", p.log.tail(60))
	}
	p.stop()
}

// stop shuts down the proxy and kills the processes, waiting for them.
func (p *Pebble) stop() {
	if p.stopped {
		return
	}
	p.stopped = true
	if p.proxy != nil {
		_ = p.proxy.Close()
		p.proxy = nil
	}
	for _, pr := range p.procs {
		pr.kill()
	}
	p.procs = nil
}

// process is a started child process.
type process struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when it has exited and its output is copied
	err  error         // why it exited; read after done
}

func (p *Pebble) spawn(bin string, args, env []string) (*process, error) {
	cmd := exec.Command(bin, args...)
	cmd.Dir = p.dir
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout = p.log
	cmd.Stderr = p.log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", filepath.Base(bin), err)
	}
	pr := &process{cmd: cmd, done: make(chan struct{})}
	go func() {
		pr.err = cmd.Wait()
		close(pr.done)
	}()
	return pr, nil
}

func (pr *process) kill() {
	_ = syscall.Kill(-pr.cmd.Process.Pid, syscall.SIGKILL)
	select {
	case <-pr.done:
	case <-time.After(10 * time.Second):
	}
}

// freePorts returns a port free for both TCP and UDP, as a DNS server
// needs, and n more TCP ports, all on 127.0.0.1, distinct, and free a moment
// ago. They come from childproc.FreePorts, below the kernel's ephemeral
// range, where no other process's port-0 listener or outgoing connection
// takes them before pebble binds them.
func freePorts(n int) (dns int, tcp []int, err error) {
	for range 20 {
		ports, err := childproc.FreePorts("127.0.0.1", n+1)
		if err != nil {
			return 0, nil, err
		}
		for i, port := range ports {
			pc, err := net.ListenPacket("udp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
			if err != nil {
				continue
			}
			pc.Close()
			return port, append(ports[:i:i], ports[i+1:]...), nil
		}
	}
	return 0, nil, errors.New("finding a port free for both TCP and UDP: none in 20 tries")
}

// logBuffer collects the processes' output. Each process writes whole lines
// through log.Logger, so lines of different processes do not mix.
//
// It is test/platformtest's SyncBuffer with tail: a package under
// internal/ does not import test/platformtest, which imports controllers/
// and so sits above it.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(b)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// tail returns the last n lines.
func (l *logBuffer) tail(n int) string {
	lines := strings.Split(strings.TrimRight(l.String(), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// testWriter sends build progress to the test log.
type testWriter struct{ t testing.TB }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Logf("%s", bytes.TrimRight(b, "\n"))
	return len(b), nil
}
