package controlplane

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"bex.co/bex/internal/childproc"
	"bex.co/bex/internal/kubebin"
	"bex.co/bex/internal/mvp"
	"bex.co/bex/internal/tcplb"
)

// Options configures a control plane.
type Options struct {
	// DataDir keeps etcd's data, the certificates, the ports and the logs.
	// Empty means a temporary directory removed by Stop. With a DataDir, a
	// second Start finds the first one's data.
	DataDir string
	// APIServers to start, in order. Empty means one apiserver at
	// kubebin.DefaultKubeVersion with MVP wired.
	APIServers []APIServerSpec
	// Binaries builds or finds the pinned binaries. Nil means a Builder with
	// the default cache directory that reports progress to Log.
	Binaries *kubebin.Builder
	// Log receives what the plane does (not the servers' own logs, which go
	// to files under DataDir/logs). Nil discards.
	Log io.Writer
	// Fsync makes etcd sync to disk. Tests leave it off for speed; embedded
	// mode turns it on.
	Fsync bool
	// StartTimeout bounds how long each server may take to become ready.
	// Zero means two minutes.
	StartTimeout time.Duration
	// LoadBalancer runs a TCP load balancer in front of the apiservers at
	// LoadBalancerIP (its port is kept in the DataDir), as a cloud load
	// balancer in front of a real control plane. The endpoint (Endpoint,
	// RESTConfig, the kubeconfig) then points at it. An apiserver joins it
	// once its /readyz answers 200 and leaves it when stopped or killed.
	LoadBalancer bool
	// APIServerPort, when set, is the port of every apiserver, each on its
	// own address, as on machines; zero gives each a free port.
	APIServerPort int
	// DrainTimeout is how long StopAPIServer lets a server that it took out
	// of the load balancer keep its open connections before it stops the
	// server. Zero means five seconds.
	DrainTimeout time.Duration
	// PeerSyncTimeout bounds how long StartAPIServer waits, once a new
	// server is ready, for its peers to list what it serves before it adds
	// the server to the load balancer (see StartAPIServer). Zero means
	// mvp.DefaultPeerSyncTimeout.
	PeerSyncTimeout time.Duration
	// AdmitBeforePeerSync adds a new server to the load balancer as soon
	// as its /readyz answers 200, without waiting for its peers: what a
	// load balancer that knows nothing of the Mixed Version Proxy does
	// (CAPH's on Hetzner). For tests that show the window it leaves.
	AdmitBeforePeerSync bool
	// KeepDeadLeases leaves the identity lease of a killed or crashed
	// apiserver in place, as on machines where nobody notices the loss, so
	// that its peers go on proxying to it (503) until something else
	// removes the lease. For tests of that something else (the verifier).
	KeepDeadLeases bool
}

// APIServerSpec describes one kube-apiserver.
type APIServerSpec struct {
	// Name is the server's hostname, and so its identity. Empty means
	// "apiserver-N".
	Name string
	// Version is a pinned Kubernetes version such as "1.37.2". Empty means
	// kubebin.DefaultKubeVersion.
	Version string
	// NoMVP leaves out --peer-ca-file (and the 1.35 gate), the way kubeadm
	// configures an apiserver: the Mixed Version Proxy is then not built.
	NoMVP bool
	// FeatureGates are added to --feature-gates.
	FeatureGates map[string]bool
	// RuntimeConfig is passed as --runtime-config when set.
	RuntimeConfig string
	// ExtraArgs are appended to the command line; a flag they give
	// replaces the plane's default for it.
	ExtraArgs []string
}

// LoadBalancerIP is the loopback address of the plane's load balancer, just
// below the apiservers' 127.0.0.11 and up. Every serving certificate carries
// it.
const LoadBalancerIP = "127.0.0.10"

// APIServer is one running kube-apiserver.
type APIServer struct {
	Spec    APIServerSpec
	Name    string
	Version string
	IP      string
	Port    int
	LogFile string

	// PeerSyncWait is how long the server, once ready, waited for its
	// peers to list what it serves before it joined the load balancer.
	PeerSyncWait time.Duration

	proc *childproc.Process
	cp   *ControlPlane
	// ending: the plane stops or kills the process itself, so its exit is
	// expected. Guarded by cp.mu.
	ending bool
}

// URL returns the server's own address.
func (s *APIServer) URL() string { return "https://" + s.Addr() }

// Addr returns the server's host:port, which is also its name in the load
// balancer.
func (s *APIServer) Addr() string { return net.JoinHostPort(s.IP, itoa(s.Port)) }

// Running reports whether the server's process is alive.
func (s *APIServer) Running() bool { return s.proc != nil && !s.proc.Exited() }

// RESTConfig returns an admin config that talks to this server only.
func (s *APIServer) RESTConfig() *rest.Config { return s.cp.configFor(s.URL()) }

// PID returns the server's process ID.
func (s *APIServer) PID() int { return s.proc.PID() }

// ControlPlane is a running etcd with its kube-apiservers.
type ControlPlane struct {
	opts    Options
	dataDir string
	temp    bool
	log     io.Writer
	pki     *planePKI
	state   *state

	etcd     *Etcd
	etcdPath string
	lb       *tcplb.LB // nil without Options.LoadBalancer

	mu          sync.Mutex
	apiservers  []*APIServer
	controllers []*childproc.Process // StartControllers'
	endpoint    string               // what RESTConfig and the kubeconfig point at
}

// state is what a DataDir remembers between starts.
type state struct {
	EtcdClientPort int            `json:"etcdClientPort"`
	EtcdPeerPort   int            `json:"etcdPeerPort"`
	Slots          map[string]int `json:"slots"` // apiserver name → address slot
	Ports          map[string]int `json:"ports"` // apiserver name → port
	LBPort         int            `json:"lbPort,omitempty"`
}

// Start builds (or finds) the binaries and starts etcd and the apiservers,
// returning once every apiserver's /readyz answers 200.
func Start(ctx context.Context, opts Options) (_ *ControlPlane, err error) {
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	if opts.StartTimeout == 0 {
		opts.StartTimeout = 2 * time.Minute
	}
	if opts.DrainTimeout == 0 {
		opts.DrainTimeout = 5 * time.Second
	}
	if opts.PeerSyncTimeout == 0 {
		opts.PeerSyncTimeout = mvp.DefaultPeerSyncTimeout
	}
	if len(opts.APIServers) == 0 {
		opts.APIServers = []APIServerSpec{{}}
	}
	if opts.Binaries == nil {
		b, err := kubebin.NewBuilder(kubebin.Options{Progress: opts.Log})
		if err != nil {
			return nil, err
		}
		opts.Binaries = b
	}
	cp := &ControlPlane{opts: opts, log: opts.Log, dataDir: opts.DataDir}
	if cp.dataDir == "" {
		if cp.dataDir, err = os.MkdirTemp("", "bex-controlplane-"); err != nil {
			return nil, err
		}
		cp.temp = true
	}
	defer func() {
		if err != nil {
			cp.Stop()
		}
	}()
	for _, d := range []string{"logs", "etcd"} {
		if err := os.MkdirAll(filepath.Join(cp.dataDir, d), 0o700); err != nil {
			return nil, err
		}
	}
	if cp.pki, err = loadOrCreatePKI(filepath.Join(cp.dataDir, "pki")); err != nil {
		return nil, err
	}
	if err := cp.loadState(); err != nil {
		return nil, err
	}
	// Build what is missing first, so that no server waits on a build.
	if cp.etcdPath, err = opts.Binaries.Etcd(ctx); err != nil {
		return nil, err
	}
	for _, spec := range opts.APIServers {
		if _, err := opts.Binaries.KubeAPIServer(ctx, versionOr(spec.Version)); err != nil {
			return nil, err
		}
	}
	if err := cp.startEtcd(ctx); err != nil {
		return nil, err
	}
	if opts.LoadBalancer {
		if err := cp.startLoadBalancer(); err != nil {
			return nil, err
		}
	}
	for i, spec := range opts.APIServers {
		if spec.Name == "" {
			spec.Name = fmt.Sprintf("apiserver-%d", i+1)
		}
		if _, err := cp.StartAPIServer(ctx, spec); err != nil {
			return nil, err
		}
	}
	cp.mu.Lock()
	cp.endpoint = cp.apiservers[0].URL()
	if cp.lb != nil {
		cp.endpoint = "https://" + cp.lb.Addr()
	}
	cp.mu.Unlock()
	if err := cp.writeKubeconfig(); err != nil {
		return nil, err
	}
	return cp, nil
}

func versionOr(v string) string {
	if v == "" {
		return kubebin.DefaultKubeVersion
	}
	return strings.TrimPrefix(v, "v")
}

func (cp *ControlPlane) statePath() string { return filepath.Join(cp.dataDir, "state.json") }

func (cp *ControlPlane) loadState() error {
	cp.state = &state{Slots: map[string]int{}, Ports: map[string]int{}}
	data, err := os.ReadFile(cp.statePath())
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading control plane state: %w", err)
	}
	if err := json.Unmarshal(data, cp.state); err != nil {
		return fmt.Errorf("reading %s: %w", cp.statePath(), err)
	}
	return nil
}

func (cp *ControlPlane) saveState() error {
	data, _ := json.MarshalIndent(cp.state, "", "  ")
	return os.WriteFile(cp.statePath(), data, 0o600)
}

func (cp *ControlPlane) startEtcd(ctx context.Context) error {
	var err error
	if cp.state.EtcdClientPort == 0 {
		ports, err := childproc.FreePorts("127.0.0.1", 2)
		if err != nil {
			return err
		}
		cp.state.EtcdClientPort, cp.state.EtcdPeerPort = ports[0], ports[1]
		if err := cp.saveState(); err != nil {
			return err
		}
	}
	cp.etcd, err = StartEtcd(ctx, EtcdOptions{
		Binary:       cp.etcdPath,
		DataDir:      filepath.Join(cp.dataDir, "etcd"),
		PKIDir:       cp.pki.dir,
		LogFile:      filepath.Join(cp.dataDir, "logs", "etcd.log"),
		ClientAddr:   "127.0.0.1:" + itoa(cp.state.EtcdClientPort),
		PeerAddr:     "127.0.0.1:" + itoa(cp.state.EtcdPeerPort),
		Fsync:        cp.opts.Fsync,
		StartTimeout: cp.opts.StartTimeout,
		Log:          cp.log,
	})
	return err
}

// startLoadBalancer starts the load balancer, with no backend yet, on the
// port of the previous start if there was one.
func (cp *ControlPlane) startLoadBalancer() error {
	var err error
	if cp.state.LBPort == 0 {
		if cp.state.LBPort, err = childproc.FreePort(LoadBalancerIP); err != nil {
			return err
		}
		if err := cp.saveState(); err != nil {
			return err
		}
	}
	if cp.lb, err = tcplb.Listen(net.JoinHostPort(LoadBalancerIP, itoa(cp.state.LBPort)), tcplb.Options{}); err != nil {
		return fmt.Errorf("starting the load balancer: %w", err)
	}
	fmt.Fprintf(cp.log, "load balancer listening on %s\n", cp.lb.Addr())
	return nil
}

// LoadBalancer returns the plane's load balancer, or nil when
// Options.LoadBalancer was not set. Its backends are the apiservers' Addr.
func (cp *ControlPlane) LoadBalancer() *tcplb.LB { return cp.lb }

// Etcd returns the plane's etcd.
func (cp *ControlPlane) Etcd() *Etcd { return cp.etcd }

// Authorities are a plane's certificate authorities and service-account
// key pair, as PEM: what Cluster API takes from a cluster's <cluster>-ca,
// -proxy and -sa Secrets in place of generating them ("Using Custom
// Certificates" in its book), so that machines it makes for the plane
// trust and are trusted by what the plane issued.
type Authorities struct {
	CACert, CAKey                     []byte
	FrontProxyCACert, FrontProxyCAKey []byte
	// ServiceAccountPub and ServiceAccountKey sign and check
	// service-account tokens.
	ServiceAccountPub, ServiceAccountKey []byte
}

// Authorities reads the plane's authorities from its DataDir.
func (cp *ControlPlane) Authorities() (Authorities, error) {
	var a Authorities
	p := cp.pki
	for _, f := range []struct {
		path string
		into *[]byte
	}{
		{p.ca.CertFile, &a.CACert}, {p.ca.KeyFile, &a.CAKey},
		{p.frontProxyCA.CertFile, &a.FrontProxyCACert}, {p.frontProxyCA.KeyFile, &a.FrontProxyCAKey},
		{p.saPubFile, &a.ServiceAccountPub}, {p.saKeyFile, &a.ServiceAccountKey},
	} {
		data, err := os.ReadFile(f.path)
		if err != nil {
			return Authorities{}, fmt.Errorf("reading the plane's authorities: %w", err)
		}
		*f.into = data
	}
	return a, nil
}

// EtcdURL returns etcd's client URL. etcd serves it over TLS and answers
// only clients that present a certificate of etcd's own CA: those of
// EtcdClient.
func (cp *ControlPlane) EtcdURL() string { return cp.etcd.URL() }

// EtcdClient returns the files a client of etcd needs, as kube-apiserver's
// --etcd-cafile, --etcd-certfile and --etcd-keyfile take them: the CA that
// signed etcd's serving certificate, and a client certificate and key etcd
// accepts.
func (cp *ControlPlane) EtcdClient() (caFile, certFile, keyFile string) {
	return cp.etcd.ClientFiles()
}

// EtcdTLSConfig returns a TLS configuration that trusts etcd's CA and
// presents the etcd client certificate.
func (cp *ControlPlane) EtcdTLSConfig() *tls.Config { return cp.etcd.TLSConfig() }

// EtcdPID returns etcd's process ID.
func (cp *ControlPlane) EtcdPID() int { return cp.etcd.PID() }

// DataDir returns the plane's data directory.
func (cp *ControlPlane) DataDir() string { return cp.dataDir }

// slotFor returns the address slot of a named apiserver: a new name gets the
// next unused slot, as a new machine gets a new address.
func (cp *ControlPlane) slotFor(name string) int {
	if s, ok := cp.state.Slots[name]; ok {
		return s
	}
	used := map[int]bool{}
	for _, s := range cp.state.Slots {
		used[s] = true
	}
	s := 1
	for used[s] {
		s++
	}
	cp.state.Slots[name] = s
	return s
}

// StartAPIServer starts one more apiserver on the plane's etcd and waits for
// its /readyz; with a load balancer it then adds the server to it, as CAPH
// adds a target once its apiserver is healthy. Its name must not be one of a
// running server.
//
// A server with MVP wired joins the load balancer only once every other
// running server with MVP wired lists, in its peer-merged discovery, all
// that the new server serves (mvp.WaitListedByPeers, bounded by
// Options.PeerSyncTimeout; APIServer.PeerSyncWait is how long that took).
// Until then an older peer would answer 404 for what only the new server
// serves: kube-apiserver syncs its peers' discovery only after they are
// ready, and retries with a backoff. Peers without MVP wired are not waited
// for: they never merge a peer's discovery, and answer 404 for what they do
// not serve whatever the new server does. When the wait fails, the server
// keeps running outside the load balancer and the error says which peer
// lacks what. Options.AdmitBeforePeerSync turns the wait off.
func (cp *ControlPlane) StartAPIServer(ctx context.Context, spec APIServerSpec) (*APIServer, error) {
	spec.Version = versionOr(spec.Version)
	if spec.Name == "" {
		return nil, errors.New("apiserver name is empty")
	}
	bin, err := cp.opts.Binaries.KubeAPIServer(ctx, spec.Version)
	if err != nil {
		return nil, err
	}
	cp.mu.Lock()
	for _, s := range cp.apiservers {
		if s.Name == spec.Name && s.Running() {
			cp.mu.Unlock()
			return nil, fmt.Errorf("apiserver %q is already running", spec.Name)
		}
	}
	slot := cp.slotFor(spec.Name)
	ip := fmt.Sprintf("127.0.0.%d", 10+slot)
	port := cp.state.Ports[spec.Name]
	cp.mu.Unlock()
	if port == 0 {
		port = cp.opts.APIServerPort
	}
	if port == 0 {
		if port, err = childproc.FreePort(ip); err != nil {
			return nil, err
		}
	}
	cp.mu.Lock()
	cp.state.Ports[spec.Name] = port
	err = cp.saveState()
	cp.mu.Unlock()
	if err != nil {
		return nil, err
	}
	serving, err := cp.pki.serving(spec.Name, net.ParseIP(ip))
	if err != nil {
		return nil, err
	}
	s := &APIServer{Spec: spec, Name: spec.Name, Version: spec.Version, IP: ip, Port: port, cp: cp,
		LogFile: filepath.Join(cp.dataDir, "logs", spec.Name+".log")}
	argv := append(HostnameCommand(spec.Name), bin)
	argv = append(argv, cp.apiserverArgs(s, serving)...)
	fmt.Fprintf(cp.log, "starting kube-apiserver v%s %q on %s (MVP %s)\n", spec.Version, spec.Name, s.URL(), wiredWord(!spec.NoMVP))
	if s.proc, err = childproc.Start(childproc.Options{Name: spec.Name, Args: argv, LogFile: s.LogFile, LogMode: 0o644}); err != nil {
		return nil, err
	}
	cp.mu.Lock()
	cp.apiservers = append(cp.apiservers, s)
	cp.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, cp.opts.StartTimeout)
	defer cancel()
	client := cp.httpClient()
	if err := s.proc.WaitReady(ctx, "kube-apiserver "+spec.Name, 200*time.Millisecond, func(ctx context.Context) error {
		return childproc.HTTPOK(ctx, client, s.URL()+"/readyz")
	}); err != nil {
		return nil, fmt.Errorf("%w\nlast lines of %s:\n%s", err, s.LogFile, s.proc.Tail(15))
	}
	go cp.watchExit(s)
	if cp.lb != nil {
		if err := cp.waitListedByPeers(ctx, s); err != nil {
			return nil, err
		}
		cp.lb.Add(s.Addr())
		fmt.Fprintf(cp.log, "kube-apiserver %q added to the load balancer\n", spec.Name)
	}
	return s, nil
}

// waitListedByPeers is StartAPIServer's admission gate: it waits until every
// other running server with MVP wired lists what s serves in its merged
// discovery, and keeps how long that took in s.PeerSyncWait.
func (cp *ControlPlane) waitListedByPeers(ctx context.Context, s *APIServer) error {
	if cp.opts.AdmitBeforePeerSync || !mvpWired(s.Spec) {
		return nil
	}
	var peers []mvp.Server
	for _, p := range cp.APIServers() {
		if p != s && p.Running() && mvpWired(p.Spec) {
			peers = append(peers, mvp.Server{Name: p.Name, Config: p.RESTConfig()})
		}
	}
	if len(peers) == 0 {
		return nil
	}
	waited, err := mvp.WaitListedByPeers(ctx, mvp.Server{Name: s.Name, Config: s.RESTConfig()}, peers, mvp.PeerSyncOptions{Timeout: cp.opts.PeerSyncTimeout})
	s.PeerSyncWait = waited
	if err != nil {
		return fmt.Errorf("kube-apiserver %q is ready but stays out of the load balancer: %w", s.Name, err)
	}
	fmt.Fprintf(cp.log, "kube-apiserver %q listed by its %d peers %.2fs after it was ready\n", s.Name, len(peers), waited.Seconds())
	return nil
}

// mvpWired reports whether an apiserver of spec runs the Mixed Version
// Proxy: the peer flags (see apiserverArgs), and neither its gate nor
// APIServerIdentity turned off.
func mvpWired(spec APIServerSpec) bool {
	on := func(gate string) bool { v, set := spec.FeatureGates[gate]; return !set || v }
	return !spec.NoMVP && on("UnknownVersionInteroperabilityProxy") && on("APIServerIdentity")
}

func wiredWord(b bool) string {
	if b {
		return "wired"
	}
	return "not wired"
}

// HostnameCommand returns the command prefix that runs a program in a new UTS
// namespace with the given hostname. Without root it also enters a new user
// namespace, where it may set the hostname.
func HostnameCommand(hostname string) []string {
	prefix := []string{"unshare", "--uts"}
	if os.Geteuid() != 0 {
		prefix = []string{"unshare", "--user", "--map-root-user", "--uts"}
	}
	return append(prefix, "--", "sh", "-c", `hostname "$0" && exec "$@"`, hostname)
}

func (cp *ControlPlane) apiserverArgs(s *APIServer, serving *keyPair) []string {
	p := cp.pki
	etcdCA, etcdCert, etcdKey := cp.etcd.ClientFiles()
	args := []string{
		"--etcd-servers=" + cp.etcd.URL(),
		"--etcd-cafile=" + etcdCA,
		"--etcd-certfile=" + etcdCert,
		"--etcd-keyfile=" + etcdKey,
		"--bind-address=" + s.IP,
		"--advertise-address=" + s.IP,
		"--secure-port=" + itoa(s.Port),
		"--tls-cert-file=" + serving.CertFile,
		"--tls-private-key-file=" + serving.KeyFile,
		"--client-ca-file=" + p.ca.CertFile,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + p.saPubFile,
		"--service-account-signing-key-file=" + p.saKeyFile,
		"--service-cluster-ip-range=10.96.0.0/12",
		"--authorization-mode=RBAC",
		"--allow-privileged=true",
		// Front proxy: used by the aggregator and by peers when MVP proxies.
		"--proxy-client-cert-file=" + p.frontProxy.CertFile,
		"--proxy-client-key-file=" + p.frontProxy.KeyFile,
		"--requestheader-client-ca-file=" + p.frontProxyCA.CertFile,
		"--requestheader-allowed-names=" + FrontProxyClientName,
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--enable-priority-and-fairness=true",
		"--profiling=false",
		// Loopback addresses may not be endpoints of the kubernetes Service.
		"--endpoint-reconciler-type=none",
	}
	gates := map[string]bool{}
	for k, v := range s.Spec.FeatureGates {
		gates[k] = v
	}
	if !s.Spec.NoMVP {
		args = append(args, "--peer-ca-file="+p.ca.CertFile)
		if strings.HasPrefix(s.Version, "1.35.") {
			if _, set := gates["UnknownVersionInteroperabilityProxy"]; !set {
				gates["UnknownVersionInteroperabilityProxy"] = true
			}
		}
	}
	if len(gates) > 0 {
		var kv []string
		for k, v := range gates {
			kv = append(kv, fmt.Sprintf("%s=%t", k, v))
		}
		sort.Strings(kv)
		args = append(args, "--feature-gates="+strings.Join(kv, ","))
	}
	if s.Spec.RuntimeConfig != "" {
		args = append(args, "--runtime-config="+s.Spec.RuntimeConfig)
	}
	// A flag ExtraArgs gives replaces the default, as kubeadm's extraArgs
	// do: list flags such as --authorization-mode refuse a second value.
	given := map[string]bool{}
	for _, a := range s.Spec.ExtraArgs {
		given[flagName(a)] = true
	}
	args = slices.DeleteFunc(args, func(a string) bool { return given[flagName(a)] })
	return append(args, s.Spec.ExtraArgs...)
}

// flagName returns the name of a --name=value argument.
func flagName(arg string) string {
	name, _, _ := strings.Cut(strings.TrimLeft(arg, "-"), "=")
	return name
}

// WiredPeers returns the running apiservers that run the Mixed Version
// Proxy, as the peers a server that joins the plane from elsewhere (a
// machine of a local fleet that took the plane over) waits on before it
// joins the load balancer (mvp.WaitListedByPeers).
func (cp *ControlPlane) WiredPeers() []mvp.Server {
	var out []mvp.Server
	for _, s := range cp.APIServers() {
		if s.Running() && mvpWired(s.Spec) {
			out = append(out, mvp.Server{Name: s.Name, Config: s.RESTConfig()})
		}
	}
	return out
}

// APIServers returns the apiservers started so far, running or not.
func (cp *ControlPlane) APIServers() []*APIServer {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	return append([]*APIServer(nil), cp.apiservers...)
}

// APIServer returns the most recent apiserver with the given name, or nil.
func (cp *ControlPlane) APIServer(name string) *APIServer {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	for i := len(cp.apiservers) - 1; i >= 0; i-- {
		if cp.apiservers[i].Name == name {
			return cp.apiservers[i]
		}
	}
	return nil
}

// DrainAPIServer takes the named apiserver out of the load balancer, so that
// no new connection reaches it, and waits until its open connections end,
// DrainTimeout passes or ctx ends, whichever comes first. Connections still
// open then are left to the server's own shutdown. The server keeps running.
// Without a load balancer it returns at once.
func (cp *ControlPlane) DrainAPIServer(ctx context.Context, name string) error {
	s := cp.APIServer(name)
	if s == nil {
		return fmt.Errorf("no apiserver named %q", name)
	}
	if cp.lb == nil {
		return nil
	}
	cp.drain(ctx, s)
	return nil
}

func (cp *ControlPlane) drain(ctx context.Context, s *APIServer) {
	cp.lb.Remove(s.Addr())
	fmt.Fprintf(cp.log, "kube-apiserver %q removed from the load balancer, draining\n", s.Name)
	ctx, cancel := context.WithTimeout(ctx, cp.opts.DrainTimeout)
	defer cancel()
	if err := cp.lb.WaitDrained(ctx, s.Addr()); err != nil {
		fmt.Fprintf(cp.log, "kube-apiserver %q: drain ended: %v\n", s.Name, err)
	}
}

// StopAPIServer stops the named apiserver as a machine deletion does: with a
// load balancer it first takes the server out of it and drains it (see
// DrainAPIServer; a server already out of it is not drained again), then it
// stops the server gracefully (SIGTERM, then SIGKILL after 30 seconds),
// holding the connections left after the drain until the server turns
// requests away (StopDrained).
func (cp *ControlPlane) StopAPIServer(name string) error {
	s := cp.APIServer(name)
	if s == nil {
		return fmt.Errorf("no apiserver named %q", name)
	}
	if cp.lb != nil && slices.Contains(cp.lb.Backends(), s.Addr()) {
		cp.drain(context.Background(), s)
	}
	fmt.Fprintf(cp.log, "stopping kube-apiserver %q\n", name)
	cp.setEnding(s)
	StopDrained(cp.lb, s.Addr(), s.proc, 30*time.Second, cp.tlsConfig(), cp.log, fmt.Sprintf("kube-apiserver %q", name))
	cp.forget(s)
	return nil
}

// KillAPIServer kills the named apiserver with SIGKILL, as a lost machine,
// takes it out of the load balancer (until then the load balancer's passive
// health rule skips it), and removes its identity lease through a surviving
// apiserver (see removeIdentityLease), unless Options.KeepDeadLeases is set.
// The server is dead when it returns; an error then says the lease could not
// be removed.
func (cp *ControlPlane) KillAPIServer(name string) error {
	s := cp.APIServer(name)
	if s == nil {
		return fmt.Errorf("no apiserver named %q", name)
	}
	fmt.Fprintf(cp.log, "killing kube-apiserver %q\n", name)
	cp.setEnding(s)
	s.proc.Kill()
	cp.forget(s)
	return cp.removeIdentityLease(context.Background(), s)
}

func (cp *ControlPlane) setEnding(s *APIServer) {
	cp.mu.Lock()
	s.ending = true
	cp.mu.Unlock()
}

// watchExit waits for s's process to end; when the plane did not end it
// (StopAPIServer, KillAPIServer, Stop), the server crashed: it is taken out
// of the load balancer and its identity lease is removed, as KillAPIServer
// does.
func (cp *ControlPlane) watchExit(s *APIServer) {
	<-s.proc.Done()
	cp.mu.Lock()
	expected := s.ending
	cp.mu.Unlock()
	if expected {
		return
	}
	fmt.Fprintf(cp.log, "kube-apiserver %q exited unexpectedly: %v\n", s.Name, s.proc.Err())
	cp.forget(s)
	if err := cp.removeIdentityLease(context.Background(), s); err != nil {
		fmt.Fprintf(cp.log, "kube-apiserver %q: %v\n", s.Name, err)
	}
}

// removeIdentityLease deletes the identity lease of s, whose process is
// dead, through the first surviving apiserver that answers
// (mvp.RemoveIdentityLease). Without it the survivors keep proxying what
// only s served to s, and answer 503, until Kubernetes garbage-collects the
// lease (up to an hour). With no survivor there is nobody to mislead.
func (cp *ControlPlane) removeIdentityLease(ctx context.Context, s *APIServer) error {
	if cp.opts.KeepDeadLeases {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var errs []error
	for _, p := range cp.APIServers() {
		if p == s || p.Name == s.Name || !p.Running() {
			continue
		}
		cs, err := kubernetes.NewForConfig(p.RESTConfig())
		if err == nil {
			var removed []string
			if removed, err = mvp.RemoveIdentityLease(ctx, cs, s.Name); err == nil {
				if len(removed) > 0 {
					fmt.Fprintf(cp.log, "identity lease %s of the dead kube-apiserver %q removed through %q\n", strings.Join(removed, ", "), s.Name, p.Name)
				}
				return nil
			}
		}
		errs = append(errs, fmt.Errorf("through %q: %w", p.Name, err))
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("removing the identity lease of the dead kube-apiserver %q: %w", s.Name, errors.Join(errs...))
}

// forget takes a server whose process has ended out of the load balancer and
// closes what is left of its connections.
func (cp *ControlPlane) forget(s *APIServer) {
	if cp.lb == nil {
		return
	}
	if cp.lb.Remove(s.Addr()) {
		fmt.Fprintf(cp.log, "kube-apiserver %q removed from the load balancer\n", s.Name)
	}
	cp.lb.CloseConns(s.Addr())
}

// SetEndpoint points RESTConfig and the admin kubeconfig at url, for example
// a load balancer in front of the apiservers.
func (cp *ControlPlane) SetEndpoint(url string) error {
	cp.mu.Lock()
	cp.endpoint = url
	cp.mu.Unlock()
	return cp.writeKubeconfig()
}

// Endpoint returns the URL RESTConfig points at.
func (cp *ControlPlane) Endpoint() string {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	return cp.endpoint
}

// RESTConfig returns an admin config for the plane's endpoint.
func (cp *ControlPlane) RESTConfig() *rest.Config { return cp.configFor(cp.Endpoint()) }

// CAFile returns the cluster CA certificate: it signs every serving
// certificate and the client certificates the apiservers accept.
func (cp *ControlPlane) CAFile() string { return cp.pki.ca.CertFile }

// FrontProxy returns the files of the front-proxy CA and client certificate,
// for an aggregated API server's requestheader settings.
func (cp *ControlPlane) FrontProxy() (caFile, certFile, keyFile string) {
	return cp.pki.frontProxyCA.CertFile, cp.pki.frontProxy.CertFile, cp.pki.frontProxy.KeyFile
}

// UserConfig returns a config that authenticates to the plane's endpoint as
// user in groups, with a client certificate signed by the cluster CA.
func (cp *ControlPlane) UserConfig(user string, groups ...string) (*rest.Config, error) {
	certPEM, keyPEM, err := cp.pki.clientCert(user, groups)
	if err != nil {
		return nil, err
	}
	cfg := cp.configFor(cp.Endpoint())
	cfg.CertFile, cfg.KeyFile = "", ""
	cfg.CertData, cfg.KeyData = certPEM, keyPEM
	return cfg, nil
}

func (cp *ControlPlane) configFor(url string) *rest.Config {
	return &rest.Config{
		Host: url,
		TLSClientConfig: rest.TLSClientConfig{
			CAFile:   cp.pki.ca.CertFile,
			CertFile: cp.pki.admin.CertFile,
			KeyFile:  cp.pki.admin.KeyFile,
		},
		QPS:   200,
		Burst: 400,
	}
}

// KubeconfigPath returns the admin kubeconfig's path.
func (cp *ControlPlane) KubeconfigPath() string { return filepath.Join(cp.dataDir, "admin.kubeconfig") }

func (cp *ControlPlane) writeKubeconfig() error {
	auth := &clientcmdapi.AuthInfo{ClientCertificate: cp.pki.admin.CertFile, ClientKey: cp.pki.admin.KeyFile}
	if err := cp.writeKubeconfigFor(cp.KubeconfigPath(), AdminUser, auth); err != nil {
		return fmt.Errorf("writing admin kubeconfig: %w", err)
	}
	return nil
}

// writeKubeconfigFor writes a kubeconfig at path for the plane's endpoint
// with user's credentials (a new file gets mode 0600).
func (cp *ControlPlane) writeKubeconfigFor(path, user string, auth *clientcmdapi.AuthInfo) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["bex"] = &clientcmdapi.Cluster{Server: cp.Endpoint(), CertificateAuthority: cp.pki.ca.CertFile}
	kc.AuthInfos[user] = auth
	kc.Contexts["bex"] = &clientcmdapi.Context{Cluster: "bex", AuthInfo: user}
	kc.CurrentContext = "bex"
	return clientcmd.WriteToFile(*kc, path)
}

// httpClient returns a client that trusts the plane's CA and presents the
// admin certificate.
func (cp *ControlPlane) httpClient() *http.Client {
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: cp.tlsConfig()}}
}

// tlsConfig verifies the apiservers and authenticates as the plane's admin.
func (cp *ControlPlane) tlsConfig() *tls.Config {
	return &tls.Config{
		RootCAs:      cp.pki.ca.Pool(),
		Certificates: []tls.Certificate{cp.pki.admin.TLSCertificate()},
	}
}

// Stop stops the controllers, every apiserver, then etcd, and removes a
// temporary data directory. No process of the plane is left when it
// returns.
func (cp *ControlPlane) Stop() {
	cp.mu.Lock()
	controllers := cp.controllers
	cp.mu.Unlock()
	for _, p := range controllers {
		p.Stop(10 * time.Second)
	}
	if cp.lb != nil {
		cp.lb.Close()
	}
	cp.mu.Lock()
	servers := append([]*APIServer(nil), cp.apiservers...)
	for _, s := range servers {
		s.ending = true
	}
	cp.mu.Unlock()
	var wg sync.WaitGroup
	for _, s := range servers {
		if s.proc != nil {
			wg.Add(1)
			go func() { defer wg.Done(); s.proc.Stop(10 * time.Second) }()
		}
	}
	wg.Wait()
	if cp.etcd != nil {
		cp.etcd.Stop(10 * time.Second)
	}
	if cp.temp {
		os.RemoveAll(cp.dataDir)
	}
}
