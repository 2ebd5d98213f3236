package localfleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"bex.co/bex/internal/controlplane"
	"bex.co/bex/internal/kubebin"
	"bex.co/bex/internal/mvp"
	"bex.co/bex/internal/tcplb"
)

// Ports every local cluster uses, each process on its own loopback
// address, as on machines of their own.
const (
	APIServerPort  = 6443
	EtcdClientPort = 2379
	EtcdPeerPort   = 2380
)

// Options configures a Host.
type Options struct {
	// Dir keeps every cluster's data: <Dir>/<namespace>/<cluster>/ holds
	// etcd's data and certificates, the machines' files and the logs. A
	// Host made again on the same Dir finds them.
	Dir string
	// Binaries builds or finds the pinned kube-apiserver and etcd.
	Binaries *kubebin.Builder
	// Log receives what the host does (not the processes' own output,
	// which goes to files under Dir). Nil discards.
	Log io.Writer
	// Fsync makes etcd sync to disk; tests leave it off.
	Fsync bool
	// StartTimeout bounds how long a process may take to become ready.
	// Zero means two minutes.
	StartTimeout time.Duration
	// DrainTimeout is how long a machine taken out of the load balancer
	// keeps its open connections before its kube-apiserver is stopped.
	// Zero means five seconds.
	DrainTimeout time.Duration
	// StopGrace is how long a stopped kube-apiserver has between SIGTERM
	// and SIGKILL, as a pod's termination grace period. Zero means 30
	// seconds.
	StopGrace time.Duration
	// PeerSyncTimeout bounds how long a new machine's kube-apiserver, once
	// ready, waits outside the load balancer until the peer-merged
	// discovery of every other running machine lists what it serves
	// (mvp.WaitListedByPeers). Zero means mvp.DefaultPeerSyncTimeout.
	PeerSyncTimeout time.Duration
	// NodeBinary is the path of bex-node, the node agent worker machines
	// run (cmd/bex-node). Its directory is the platform's binary directory
	// the agents give containers on the run base (--platform-bin-dir):
	// bex-static, built beside it, serves static sites. Without it the
	// host runs control-plane machines only.
	NodeBinary string
	// NodeRegistryConfig is a Docker config.json with the registry
	// credentials the node agents pull with after a Pod's own image pull
	// secrets [none].
	NodeRegistryConfig string
}

// Host runs the processes of local clusters: per cluster an etcd and a TCP
// load balancer, per machine a kube-apiserver and what a kubelet and
// kubeadm would keep up for it. It is safe for concurrent use.
type Host struct {
	opts Options

	mu       sync.Mutex
	clusters map[string]*Cluster
	planes   map[string]*Plane
}

// Plane is a running control plane that a cluster of the Host takes over
// (ClusterSpec.Plane) in place of an etcd and a load balancer of its own:
// the platform's own, which Cluster API then manages with machines of this
// Host (docs/fleet.md, "The management plane"). The Host neither starts
// nor stops its etcd and load balancer.
type Plane struct {
	// Etcd is the plane's etcd, the cluster's external etcd.
	Etcd *controlplane.Etcd
	// LoadBalancer is the plane's endpoint. The cluster's machines join it
	// and listen on its port, each on its own address of the cluster's
	// block.
	LoadBalancer *tcplb.LB
	// Peers returns the plane's running kube-apiservers that are not
	// machines of the Host (the one the plane was started with, until it
	// leaves): a machine joins the load balancer only once they too list
	// what it serves, and a gone machine's identity lease may be removed
	// through them. Nil means none.
	Peers func() []mvp.Server
}

// MachineVersions returns the Kubernetes versions (such as "1.37.2") the
// control-plane machines of cluster ns/name last ran, as their files under
// dir (a Host's Options.Dir) keep them; none when it has no machine. A
// plane that a cluster took over starts again no older than them: a
// kube-apiserver must not serve what a newer one wrote.
func MachineVersions(dir, ns, name string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, ns, name, "machines", "*", "machine.json"))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var st machineState
		if err := json.Unmarshal(data, &st); err != nil {
			return nil, fmt.Errorf("reading %s: %w", f, err)
		}
		if st.Version != "" {
			out = append(out, st.Version)
		}
	}
	return out, nil
}

// PlaneAPIServerArgs returns the flags a plane's own kube-apiserver needs
// beside the machines that join it, which kubeadm starts with them: a
// joining machine reads kubeadm-config with a bootstrap token, and
// registers its Node with its node credentials (the Node authorizer and
// NodeRestriction), through the load balancer, and so possibly through
// that server.
func PlaneAPIServerArgs() []string {
	return []string{
		"--enable-bootstrap-token-auth=true",
		"--authorization-mode=Node,RBAC",
		"--enable-admission-plugins=NodeRestriction",
	}
}

// RegisterPlane makes the running control plane p known as name, for a
// cluster whose ClusterSpec.Plane names it. A plane registered again
// replaces the earlier one for clusters started afterwards.
func (h *Host) RegisterPlane(name string, p Plane) error {
	if name == "" || p.Etcd == nil || p.LoadBalancer == nil {
		return errors.New("localfleet: a plane needs a name, its etcd and its load balancer")
	}
	if _, _, err := net.SplitHostPort(p.LoadBalancer.Addr()); err != nil {
		return fmt.Errorf("localfleet: plane %s's load balancer address: %w", name, err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.planes[name] = &p
	return nil
}

// NewHost returns a Host; it starts nothing.
func NewHost(opts Options) (*Host, error) {
	if opts.Dir == "" {
		return nil, errors.New("localfleet: Options.Dir is empty")
	}
	if opts.Binaries == nil {
		return nil, errors.New("localfleet: Options.Binaries is nil")
	}
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	if opts.StartTimeout == 0 {
		opts.StartTimeout = 2 * time.Minute
	}
	if opts.DrainTimeout == 0 {
		opts.DrainTimeout = 5 * time.Second
	}
	if opts.StopGrace == 0 {
		opts.StopGrace = 30 * time.Second
	}
	return &Host{opts: opts, clusters: map[string]*Cluster{}, planes: map[string]*Plane{}}, nil
}

// ClusterSpec names a cluster and where it listens.
type ClusterSpec struct {
	Namespace, Name string
	// Block is the cluster's loopback /24: the load balancer at .1, etcd
	// at .2, machines from .11.
	Block netip.Prefix
	// Plane, when set, names a registered Plane (RegisterPlane) whose
	// etcd and load balancer the cluster takes over: the block then holds
	// its machines only, which listen on the plane's load balancer port.
	Plane string
}

// ParseBlock reads a LocalCluster's addressBlock, a /24 in 127.0.0.0/8.
func ParseBlock(s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("address block %q: %w", s, err)
	}
	if p.Bits() != 24 || !p.Addr().Is4() || p.Addr().As4()[0] != 127 || p.Masked() != p {
		return netip.Prefix{}, fmt.Errorf("address block %q is not a /24 in 127.0.0.0/8 such as 127.77.3.0/24", s)
	}
	return p, nil
}

// blockAddr returns the address .n of the block.
func blockAddr(block netip.Prefix, n byte) netip.Addr {
	a := block.Addr().As4()
	a[3] = n
	return netip.AddrFrom4(a)
}

// EtcdAddr returns the address of the etcd of the cluster in block.
func EtcdAddr(block netip.Prefix) netip.Addr { return blockAddr(block, 2) }

// FreeBlock returns a /24 in 127.77.0.0/16 not in used whose load balancer
// and etcd addresses can be bound on this machine now.
func FreeBlock(used []netip.Prefix) (netip.Prefix, error) {
	taken := map[netip.Prefix]bool{}
	for _, p := range used {
		taken[p] = true
	}
	for third := 1; third < 255; third++ {
		p := netip.PrefixFrom(netip.AddrFrom4([4]byte{127, 77, byte(third), 0}), 24)
		if taken[p] {
			continue
		}
		if bindable(blockAddr(p, 1), APIServerPort) && bindable(blockAddr(p, 2), EtcdClientPort) {
			return p, nil
		}
	}
	return netip.Prefix{}, errors.New("no free /24 in 127.77.0.0/16")
}

func bindable(a netip.Addr, port int) bool {
	l, err := net.Listen("tcp", netip.AddrPortFrom(a, uint16(port)).String())
	if err != nil {
		return false
	}
	l.Close()
	return true
}

func key(ns, name string) string { return ns + "/" + name }

// Cluster is the running processes of one local cluster.
type Cluster struct {
	host *Host
	spec ClusterSpec
	dir  string

	etcd *controlplane.Etcd
	lb   *tcplb.LB
	// plane is the Plane the cluster took over, nil when the etcd and the
	// load balancer are its own.
	plane *Plane
	port  int // the plane's load balancer's; zero: APIServerPort (Port)

	mu       sync.Mutex
	state    clusterState
	machines map[string]*Machine
	workers  map[string]*Worker
}

// clusterState is what a cluster's directory remembers between starts.
type clusterState struct {
	Block string         `json:"block"`
	Slots map[string]int `json:"slots"` // machine → address .(10+slot)
}

// EnsureCluster starts the cluster's etcd and load balancer unless they
// run, and returns the cluster.
func (h *Host) EnsureCluster(ctx context.Context, spec ClusterSpec) (*Cluster, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	k := key(spec.Namespace, spec.Name)
	if c, ok := h.clusters[k]; ok {
		if c.spec.Block != spec.Block || c.spec.Plane != spec.Plane {
			return nil, fmt.Errorf("cluster %s runs in %s%s, not %s%s", k, c.spec.Block, planeWords(c.spec.Plane), spec.Block, planeWords(spec.Plane))
		}
		if c.etcd.Running() {
			return c, nil
		}
		c.stopProcesses()
		delete(h.clusters, k)
	}
	c := &Cluster{host: h, spec: spec, dir: filepath.Join(h.opts.Dir, spec.Namespace, spec.Name), machines: map[string]*Machine{}, workers: map[string]*Worker{}}
	if spec.Plane != "" {
		p, ok := h.planes[spec.Plane]
		if !ok {
			return nil, fmt.Errorf("cluster %s takes over control plane %q, which does not run on this host (only the platform's own, registered when it starts, can be taken over)", k, spec.Plane)
		}
		c.plane = p
	}
	if err := c.start(ctx); err != nil {
		c.stopProcesses()
		return nil, fmt.Errorf("starting cluster %s: %w", k, err)
	}
	h.clusters[k] = c
	return c, nil
}

func planeWords(plane string) string {
	if plane == "" {
		return ""
	}
	return " on control plane " + plane
}

// Cluster returns the running cluster, or nil.
func (h *Host) Cluster(ns, name string) *Cluster {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.clusters[key(ns, name)]
}

// DeleteCluster stops the cluster's machines, load balancer and etcd and
// removes its directory.
func (h *Host) DeleteCluster(ns, name string) error {
	h.mu.Lock()
	c := h.clusters[key(ns, name)]
	delete(h.clusters, key(ns, name))
	h.mu.Unlock()
	if c != nil {
		c.stopProcesses()
	}
	resetNodes(h.opts.NodeBinary, filepath.Join(h.opts.Dir, ns, name, "machines", "*"), h.opts.Log)
	if err := os.RemoveAll(filepath.Join(h.opts.Dir, ns, name)); err != nil {
		return fmt.Errorf("removing cluster %s/%s's files: %w", ns, name, err)
	}
	fmt.Fprintf(h.opts.Log, "cluster %s/%s deleted\n", ns, name)
	return nil
}

// Close stops every process of every cluster and keeps their files, as a
// machine that is shut down: a Host made again on the same Dir starts them
// again as the clusters' objects are reconciled.
func (h *Host) Close() {
	h.mu.Lock()
	clusters := h.clusters
	h.clusters = map[string]*Cluster{}
	h.mu.Unlock()
	var wg sync.WaitGroup
	for _, c := range clusters {
		wg.Add(1)
		go func() { defer wg.Done(); c.stopProcesses() }()
	}
	wg.Wait()
}

// ResetNodes removes the containers the node agents of every worker
// machine left running (bex-node reset), which outlive the agents' stop
// as a kubelet's do; Close first. Tests call it at their end, as a
// machine that is gone would not leave them.
func (h *Host) ResetNodes() {
	ResetNodes(h.opts.Dir, h.opts.NodeBinary, h.opts.Log)
}

// ResetNodes removes, with nodeBinary's bex-node reset, the containers
// the node agents of every worker machine of the fleet in dir (a Host's
// Options.Dir; make run's <state>/fleet) left running, once the Host
// that ran them stopped: what a test or a bench whose platform ran that
// fleet does at its end. Failures go to log.
func ResetNodes(dir, nodeBinary string, log io.Writer) {
	resetNodes(nodeBinary, filepath.Join(dir, "*", "*", "machines", "*"), log)
}

func (c *Cluster) start(ctx context.Context) error {
	for _, d := range []string{"logs", "machines"} {
		if err := os.MkdirAll(filepath.Join(c.dir, d), 0o700); err != nil {
			return err
		}
	}
	if err := c.loadState(); err != nil {
		return err
	}
	if c.plane != nil {
		c.etcd, c.lb = c.plane.Etcd, c.plane.LoadBalancer
		_, port, _ := net.SplitHostPort(c.lb.Addr())
		c.port, _ = strconv.Atoi(port)
		fmt.Fprintf(c.host.opts.Log, "cluster %s: takes over control plane %s: etcd on %s, load balancer on %s\n", key(c.spec.Namespace, c.spec.Name), c.spec.Plane, c.etcd.URL(), c.lb.Addr())
		return nil
	}
	etcdBin, err := c.host.opts.Binaries.Etcd(ctx)
	if err != nil {
		return err
	}
	etcdIP := EtcdAddr(c.spec.Block).String()
	c.etcd, err = controlplane.StartEtcd(ctx, controlplane.EtcdOptions{
		Binary:       etcdBin,
		DataDir:      filepath.Join(c.dir, "etcd"),
		PKIDir:       filepath.Join(c.dir, "etcd-pki"),
		LogFile:      filepath.Join(c.dir, "logs", "etcd.log"),
		ClientAddr:   net.JoinHostPort(etcdIP, fmt.Sprint(EtcdClientPort)),
		PeerAddr:     net.JoinHostPort(etcdIP, fmt.Sprint(EtcdPeerPort)),
		Fsync:        c.host.opts.Fsync,
		StartTimeout: c.host.opts.StartTimeout,
		Log:          c.host.opts.Log,
	})
	if err != nil {
		return err
	}
	if c.lb, err = tcplb.Listen(c.Endpoint(), tcplb.Options{}); err != nil {
		return fmt.Errorf("starting the load balancer: %w", err)
	}
	fmt.Fprintf(c.host.opts.Log, "cluster %s: etcd on %s, load balancer on %s\n", key(c.spec.Namespace, c.spec.Name), c.etcd.URL(), c.lb.Addr())
	return nil
}

func (c *Cluster) statePath() string { return filepath.Join(c.dir, "state.json") }

func (c *Cluster) loadState() error {
	c.state = clusterState{Block: c.spec.Block.String(), Slots: map[string]int{}}
	data, err := os.ReadFile(c.statePath())
	if errors.Is(err, os.ErrNotExist) {
		return c.saveState()
	}
	if err != nil {
		return err
	}
	var st clusterState
	if err := json.Unmarshal(data, &st); err != nil {
		return fmt.Errorf("reading %s: %w", c.statePath(), err)
	}
	if st.Block != c.state.Block {
		return fmt.Errorf("%s was made for address block %s, not %s", c.dir, st.Block, c.state.Block)
	}
	if st.Slots != nil {
		c.state.Slots = st.Slots
	}
	return nil
}

// saveState writes the state; c.mu is held or c not yet shared.
func (c *Cluster) saveState() error {
	data, _ := json.MarshalIndent(c.state, "", "  ")
	return os.WriteFile(c.statePath(), data, 0o600)
}

// Endpoint returns the control-plane endpoint, the load balancer's
// host:port.
func (c *Cluster) Endpoint() string {
	if c.plane != nil {
		return c.lb.Addr()
	}
	return netip.AddrPortFrom(blockAddr(c.spec.Block, 1), APIServerPort).String()
}

// EndpointHost returns the control-plane endpoint's host.
func (c *Cluster) EndpointHost() string {
	host, _, _ := net.SplitHostPort(c.Endpoint())
	return host
}

// Port returns the port of the endpoint and of every machine's
// kube-apiserver: APIServerPort, or the load balancer's of the plane the
// cluster took over.
func (c *Cluster) Port() int {
	if c.port == 0 {
		return APIServerPort
	}
	return c.port
}

// Etcd returns the cluster's etcd.
func (c *Cluster) Etcd() *controlplane.Etcd { return c.etcd }

// Backends returns the kube-apiservers in the load balancer.
func (c *Cluster) Backends() []string { return c.lb.Backends() }

// LoadBalancer returns the cluster's load balancer.
func (c *Cluster) LoadBalancer() *tcplb.LB { return c.lb }

// slot returns the machine's address slot, giving a new machine the lowest
// free one; release gives it back.
func (c *Cluster) slot(name string) (netip.Addr, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.state.Slots[name]
	if !ok {
		used := map[int]bool{}
		for _, s := range c.state.Slots {
			used[s] = true
		}
		for s = 1; used[s]; s++ {
		}
		if s > 240 {
			return netip.Addr{}, fmt.Errorf("cluster %s has no free machine address in %s", c.spec.Name, c.spec.Block)
		}
		c.state.Slots[name] = s
		if err := c.saveState(); err != nil {
			return netip.Addr{}, err
		}
	}
	return blockAddr(c.spec.Block, byte(10+s)), nil
}

func (c *Cluster) release(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.state.Slots, name)
	c.saveState()
}

// Machine returns the named running machine, or nil.
func (c *Cluster) Machine(name string) *Machine {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.machines[name]
}

// Machines returns the cluster's running control-plane machines.
func (c *Cluster) Machines() []*Machine {
	return c.machinesExcept("")
}

// machinesExcept returns the cluster's machines other than name.
func (c *Cluster) machinesExcept(name string) []*Machine {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*Machine
	for n, m := range c.machines {
		if n != name {
			out = append(out, m)
		}
	}
	return out
}

// stopProcesses stops every worker and control-plane machine (without
// removing their files), the load balancer and etcd.
func (c *Cluster) stopProcesses() {
	c.mu.Lock()
	workers, machines := c.workers, c.machines
	c.workers, c.machines = map[string]*Worker{}, map[string]*Machine{}
	c.mu.Unlock()
	haltAll(workers)
	if c.plane != nil {
		// The plane's load balancer and etcd live on without the
		// machines.
		for _, m := range machines {
			c.lb.Remove(m.Addr())
			c.lb.CloseConns(m.Addr())
		}
		haltAll(machines)
		return
	}
	if c.lb != nil {
		c.lb.Close()
	}
	haltAll(machines)
	if c.etcd != nil {
		c.etcd.Stop(10 * time.Second)
	}
}

// haltAll halts the machines at once and waits for them.
func haltAll[M interface{ halt(time.Duration) }](machines map[string]M) {
	var wg sync.WaitGroup
	for _, m := range machines {
		wg.Add(1)
		go func() { defer wg.Done(); m.halt(10 * time.Second) }()
	}
	wg.Wait()
}
