package localfleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"bex.co/bex/internal/childproc"
	"bex.co/bex/internal/controlplane"
	"bex.co/bex/internal/mvp"
)

// MachineSpec is what a machine is made from.
type MachineSpec struct {
	// Name is the machine's hostname and its Node's name.
	Name string
	// Version is the Kubernetes version of its kube-apiserver, such as
	// "v1.36.3": one that kubebin builds.
	Version string
	// ProviderID is what its Node's spec.providerID says.
	ProviderID string
	// BootstrapData is the cloud-config Cluster API's kubeadm bootstrap
	// provider made for it, read on the first start only.
	BootstrapData []byte
}

// Machine is one control-plane machine of a local cluster: a kube-apiserver,
// kube-controller-manager and kube-scheduler in its own UTS namespace on
// its own loopback address, started from its bootstrap data as kubeadm
// would, and what a kubelet keeps up for it (its Node and its lease, the
// control-plane components' mirror Pods).
type Machine struct {
	c    *Cluster
	spec MachineSpec
	ip   netip.Addr
	dir  string // the machine's directory; root/ is its "/"
	bin  string
	st   machineState
	pki  *nodePKI
	// comps are kube-controller-manager and kube-scheduler.
	comps []*componentProc
	probe *http.Client // the kubelet's probes

	local *rest.Config // admin, to its own kube-apiserver
	admin *rest.Config // admin, through the load balancer
	node  *rest.Config // system:node:NAME, through the load balancer

	supervised // the kube-apiserver
	lost       bool
	nodeUID    types.UID
	ready      bool // the kube-apiserver is ready and in the load balancer
}

// machineState is what a machine's directory keeps between starts, as a
// node keeps its static Pod manifest and certificates.
type machineState struct {
	Version string   `json:"version"`
	Init    bool     `json:"init"`
	Args    []string `json:"args"`
	// ComponentArgs are kube-controller-manager's and kube-scheduler's
	// flags, by name. A state written before machines ran them has none:
	// they are made on its next start.
	ComponentArgs map[string][]string `json:"componentArgs,omitempty"`
	// ClusterConfiguration is the ClusterConfiguration document the
	// machine was made with.
	ClusterConfiguration string `json:"clusterConfiguration"`
	CertDir              string `json:"certDir"`
	// NodeRegistration is the init or join configuration's.
	NodeRegistration nodeRegistration `json:"nodeRegistration"`
}

// IP returns the machine's address.
func (m *Machine) IP() netip.Addr { return m.ip }

// Addr returns the kube-apiserver's host:port, its name in the load balancer.
func (m *Machine) Addr() string { return netip.AddrPortFrom(m.ip, uint16(m.c.Port())).String() }

// Name returns the machine's hostname.
func (m *Machine) Name() string { return m.spec.Name }

// Version returns its kube-apiserver's version.
func (m *Machine) Version() string { return m.spec.Version }

// Init reports whether the machine was the cluster's first ("kubeadm init").
func (m *Machine) Init() bool { return m.st.Init }

// AdminConfig returns an admin (system:masters) config for the machine's
// own kube-apiserver.
func (m *Machine) AdminConfig() *rest.Config { return rest.CopyConfig(m.local) }

// EndpointConfig returns an admin config for the cluster's endpoint.
func (m *Machine) EndpointConfig() *rest.Config { return rest.CopyConfig(m.admin) }

// APIServerCertificateExpiry returns when the kube-apiserver's serving
// certificate expires.
func (m *Machine) APIServerCertificateExpiry() time.Time { return m.pki.APIServerExpiry }

// Lost reports whether the machine was lost (KillMachine).
func (m *Machine) Lost() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.lost
}

// StartMachine makes the machine and starts it, unless it runs: on the
// first start it writes the bootstrap data's files under the machine's
// directory, reads the kubeadm configuration (for a join, the
// ClusterConfiguration from the cluster's kubeadm-config, with the
// bootstrap token), issues the node's certificates and writes the flags of
// kube-apiserver, kube-controller-manager and kube-scheduler; on a later
// start (after the Host was closed) it reuses them. The two components
// start once the kube-apiserver is ready. It returns once the
// kube-apiserver is in the load balancer, both components answer /healthz,
// and its Node and mirror Pods are registered.
func (c *Cluster) StartMachine(ctx context.Context, spec MachineSpec) (_ *Machine, err error) {
	spec.Version = strings.TrimPrefix(spec.Version, "v")
	if m := c.Machine(spec.Name); m != nil {
		if m.spec.Version != spec.Version {
			return nil, fmt.Errorf("machine %s runs v%s, not v%s: a machine's version does not change, a new machine replaces it", spec.Name, m.spec.Version, spec.Version)
		}
		return m, nil
	}
	ip, err := c.slot(spec.Name)
	if err != nil {
		return nil, err
	}
	m := &Machine{c: c, spec: spec, ip: ip, dir: filepath.Join(c.dir, "machines", spec.Name),
		probe: probeClient(), supervised: newSupervised()}
	if m.bin, err = c.host.opts.Binaries.KubeAPIServer(ctx, spec.Version); err != nil {
		return nil, err
	}
	if err := m.prepare(ctx); err != nil {
		return nil, fmt.Errorf("machine %s: %w", spec.Name, err)
	}
	if m.comps, err = m.components(ctx); err != nil {
		return nil, fmt.Errorf("machine %s: %w", spec.Name, err)
	}
	defer func() {
		if err != nil {
			m.abortStart()
			err = fmt.Errorf("machine %s: %w", spec.Name, err)
		}
	}()
	if err := m.startProcess(ctx); err != nil {
		return nil, err
	}
	if err := m.startComponents(); err != nil {
		return nil, err
	}
	if m.st.Init {
		if err := m.uploadConfig(ctx); err != nil {
			return nil, err
		}
	}
	if err := m.joinLoadBalancer(ctx); err != nil {
		return nil, err
	}
	if err := m.registerNode(ctx); err != nil {
		return nil, err
	}
	if err := m.waitComponents(ctx); err != nil {
		return nil, err
	}
	m.setReady(true)
	if err := m.syncMirrorPods(ctx); err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.machines[spec.Name] = m
	c.mu.Unlock()
	go m.supervise()
	fmt.Fprintf(c.host.opts.Log, "machine %s: kube-apiserver v%s on %s, in the load balancer; kube-controller-manager and kube-scheduler ready\n", spec.Name, spec.Version, m.Addr())
	return m, nil
}

// abortStart ends a start that failed: the kube-apiserver leaves the load
// balancer (it may have joined it), its processes stop and its identity
// lease goes. Left in the rotation, the address would get the clients'
// new connections as soon as the next start's kube-apiserver listens,
// before it is ready: answers such as 403 while its authorizer has synced
// no role.
func (m *Machine) abortStart() {
	m.c.lb.Remove(m.Addr())
	m.halt(10 * time.Second)
	m.c.lb.CloseConns(m.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m.gone(ctx)
}

func (m *Machine) statePath() string { return filepath.Join(m.dir, "machine.json") }
func (m *Machine) root() string      { return filepath.Join(m.dir, "root") }

func (m *Machine) saveState() error {
	data, _ := json.MarshalIndent(m.st, "", "  ")
	return os.WriteFile(m.statePath(), data, 0o600)
}

// prepare does what "kubeadm init" or "kubeadm join" does before the
// kubelet starts the static Pods, or reads what it did on a first start.
func (m *Machine) prepare(ctx context.Context) error {
	if err := os.MkdirAll(m.dir, 0o700); err != nil {
		return err
	}
	data, err := os.ReadFile(m.statePath())
	switch {
	case err == nil:
		if err := json.Unmarshal(data, &m.st); err != nil {
			return fmt.Errorf("reading %s: %w", m.statePath(), err)
		}
		if m.st.Version != m.spec.Version {
			return fmt.Errorf("its directory holds a v%s machine, not v%s", m.st.Version, m.spec.Version)
		}
		if m.pki, err = loadNodePKI(filepath.Join(m.root(), filepath.FromSlash(m.st.CertDir))); err != nil {
			return err
		}
		cc, err := parseClusterConfiguration([]byte(m.st.ClusterConfiguration))
		if err != nil {
			return err
		}
		if err := m.pki.issue(cc, m.spec.Name, m.ip.AsSlice(), m.c.EndpointHost()); err != nil {
			return err
		}
		if m.st.ComponentArgs == nil {
			m.st.ComponentArgs = componentArgs(cc, m.root(), m.ip.String())
			if err := m.saveState(); err != nil {
				return err
			}
		}
		if err := m.writeKubeconfigs(); err != nil {
			return err
		}
		return m.clients()
	case !errors.Is(err, os.ErrNotExist):
		return err
	}
	files, err := parseCloudConfig(m.spec.BootstrapData)
	if err != nil {
		return err
	}
	kc, err := readKubeadmConfig(files)
	if err != nil {
		return err
	}
	if err := kc.checkRole(false); err != nil {
		return err
	}
	if err := writeFiles(m.root(), files); err != nil {
		return err
	}
	m.st = machineState{Version: m.spec.Version, Init: kc.Init != nil}
	if kc.Init != nil {
		m.st.NodeRegistration = kc.Init.NodeRegistration
	}
	if kc.Join != nil {
		m.st.NodeRegistration = kc.Join.NodeRegistration
		if kc.Cluster, kc.ClusterYAML, err = m.discover(ctx, kc.Join); err != nil {
			return err
		}
	}
	m.st.ClusterConfiguration = string(kc.ClusterYAML)
	m.st.CertDir = kc.Cluster.certDir()
	if m.pki, err = loadNodePKI(filepath.Join(m.root(), filepath.FromSlash(m.st.CertDir))); err != nil {
		return err
	}
	if err := m.pki.issue(kc.Cluster, m.spec.Name, m.ip.AsSlice(), m.c.EndpointHost()); err != nil {
		return err
	}
	m.st.Args = apiServerArgs(kc.Cluster, m.root(), m.ip.String(), m.c.Port())
	m.st.ComponentArgs = componentArgs(kc.Cluster, m.root(), m.ip.String())
	if err := m.writeKubeconfigs(); err != nil {
		return err
	}
	if err := m.clients(); err != nil {
		return err
	}
	return m.saveState()
}

// clients makes the machine's admin and node configs.
func (m *Machine) clients() error {
	var err error
	if m.local, err = m.pki.clientConfig("https://"+m.Addr(), "kubernetes-super-admin", "system:masters"); err != nil {
		return err
	}
	if m.admin, err = m.pki.clientConfig("https://"+m.c.Endpoint(), "kubernetes-super-admin", "system:masters"); err != nil {
		return err
	}
	m.node, err = m.pki.clientConfig("https://"+m.c.Endpoint(), "system:node:"+m.spec.Name, "system:nodes")
	return err
}

// discover reads the cluster's ClusterConfiguration as "kubeadm join"
// does: from kube-system/kubeadm-config, authenticated with the bootstrap
// token, through the endpoint the JoinConfiguration names.
func (m *Machine) discover(ctx context.Context, join *joinConfiguration) (*clusterConfiguration, []byte, error) {
	ca, err := os.ReadFile(filepath.Join(m.root(), "etc", "kubernetes", "pki", "ca.crt"))
	if err != nil {
		return nil, nil, fmt.Errorf("reading the cluster CA to discover the cluster with: %w", err)
	}
	cm, err := join.readKubeadmConfigMap(ctx, ca)
	if err != nil {
		return nil, nil, err
	}
	doc := []byte(cm.Data["ClusterConfiguration"])
	cc, err := parseClusterConfiguration(doc)
	if err != nil {
		return nil, nil, fmt.Errorf("kube-system/kubeadm-config: %w", err)
	}
	return cc, doc, nil
}

// startProcess starts the kube-apiserver and waits for its /readyz.
func (m *Machine) startProcess(ctx context.Context) error {
	argv := append(append(controlplane.HostnameCommand(m.spec.Name), m.bin), m.st.Args...)
	proc, err := childproc.Start(childproc.Options{Name: m.spec.Name, Args: argv,
		LogFile: filepath.Join(m.c.dir, "logs", m.spec.Name+".log"), LogMode: 0o644})
	if err != nil {
		return err
	}
	m.mu.Lock()
	m.proc = proc
	m.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, m.c.host.opts.StartTimeout)
	defer cancel()
	hc, err := rest.HTTPClientFor(m.local)
	if err != nil {
		return err
	}
	if err := proc.WaitReady(ctx, "kube-apiserver "+m.spec.Name, 200*time.Millisecond, func(ctx context.Context) error {
		return childproc.HTTPOK(ctx, hc, "https://"+m.Addr()+"/readyz")
	}); err != nil {
		return fmt.Errorf("%w\nlast lines of its log:\n%s", err, proc.Tail(15))
	}
	return nil
}

// uploadConfig does what "kubeadm init" does once the first kube-apiserver
// runs and Cluster API reads: the kubeadm-config ConfigMap, the RBAC
// that lets a joining machine read it with its bootstrap token, and the
// binding of kubeadm's cluster admins.
func (m *Machine) uploadConfig(ctx context.Context) error {
	cs, err := kubernetes.NewForConfig(m.local)
	if err != nil {
		return err
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kubeadm-config", Namespace: metav1.NamespaceSystem},
		Data: map[string]string{"ClusterConfiguration": m.st.ClusterConfiguration}}
	if _, err := cs.CoreV1().ConfigMaps(metav1.NamespaceSystem).Create(ctx, cm, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("uploading kubeadm-config: %w", err)
	}
	const role = "kubeadm:nodes-kubeadm-config"
	r := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: role, Namespace: metav1.NamespaceSystem},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"kubeadm-config"}, Verbs: []string{"get"}}}}
	if _, err := cs.RbacV1().Roles(metav1.NamespaceSystem).Create(ctx, r, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating Role %s: %w", role, err)
	}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role, Namespace: metav1.NamespaceSystem},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role},
		Subjects: []rbacv1.Subject{
			{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: "system:bootstrappers:kubeadm:default-node-token"},
			{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: "system:nodes"},
		}}
	if _, err := cs.RbacV1().RoleBindings(metav1.NamespaceSystem).Create(ctx, rb, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating RoleBinding %s: %w", role, err)
	}
	// kubeadm's cluster admins: the group of the kube-apiservers' kubelet
	// client certificate, which a node agent's SubjectAccessReview checks
	// before it serves a container's log.
	const admins = "kubeadm:cluster-admins"
	crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: admins},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: admins}}}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating ClusterRoleBinding %s: %w", admins, err)
	}
	return nil
}

// joinLoadBalancer adds the kube-apiserver to the cluster's load balancer.
// A server that runs the Mixed Version Proxy joins only once every other
// running machine that runs it lists what it serves in its peer-merged
// discovery: until then an older peer would answer 404 for a resource only
// the new server serves (docs/upgrades.md, the peer-sync gate).
func (m *Machine) joinLoadBalancer(ctx context.Context) error {
	if m.wired() {
		var peers []mvp.Server
		for _, p := range m.c.machinesExcept(m.spec.Name) {
			if p.Running() && p.wired() {
				peers = append(peers, mvp.Server{Name: p.Name(), Config: p.AdminConfig()})
			}
		}
		peers = append(peers, m.c.planePeers()...)
		wait, err := mvp.WaitListedByPeers(ctx, mvp.Server{Name: m.spec.Name, Config: m.AdminConfig()}, peers,
			mvp.PeerSyncOptions{Timeout: m.c.host.opts.PeerSyncTimeout})
		if err != nil {
			return fmt.Errorf("admitting the kube-apiserver to the load balancer: %w", err)
		}
		if len(peers) > 0 {
			fmt.Fprintf(m.c.host.opts.Log, "machine %s: its %d peers list what it serves after %s\n", m.spec.Name, len(peers), wait.Round(10*time.Millisecond))
		}
	}
	m.c.lb.Add(m.Addr())
	return nil
}

// wired reports whether the kube-apiserver runs the Mixed Version Proxy:
// kube-apiserver builds it only with --peer-ca-file.
func (m *Machine) wired() bool {
	v, _ := flagValue(m.st.Args, "peer-ca-file")
	return v != ""
}

// supervise keeps the machine up as the kubelet keeps a node's static
// Pods: it restarts the kube-apiserver, kube-controller-manager and
// kube-scheduler each when it exits, and every 10 seconds renews the
// Node's lease and reports the mirror Pods' readiness, until the machine
// is stopped.
func (m *Machine) supervise() {
	defer close(m.done)
	loops := []func(){m.superviseAPIServer, m.heartbeat}
	for _, c := range m.comps {
		loops = append(loops, func() { m.superviseComponent(c) })
	}
	var wg sync.WaitGroup
	for _, loop := range loops {
		wg.Add(1)
		go func() { defer wg.Done(); loop() }()
	}
	wg.Wait()
}

// heartbeat renews the Node's lease, as the kubelet does every 10 seconds
// (the node lifecycle controller marks a Node whose lease is not renewed
// unknown), and reports the mirror Pods' readiness, the kubelet's probes.
// What fails is tried again on the next tick.
func (m *Machine) heartbeat() {
	tick := time.NewTicker(10 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-tick.C:
		}
		ctx, cancel := m.keeper().stopContext(10 * time.Second)
		m.renewNodeLease(ctx)
		m.syncMirrorPods(ctx)
		cancel()
	}
}

// superviseAPIServer restarts the kube-apiserver when it exits: out of the
// load balancer, its identity lease removed and its mirror Pod not ready
// until it is ready again and admitted back.
func (m *Machine) superviseAPIServer() {
	m.keeper().keepRunning(restartable{
		name:    "kube-apiserver",
		current: m.current,
		exited: func(ctx context.Context) {
			m.setReady(false)
			m.c.lb.Remove(m.Addr())
			m.c.lb.CloseConns(m.Addr())
			m.gone(ctx)
			m.syncMirrorPods(ctx)
		},
		start: func(ctx context.Context) error {
			if err := m.startProcess(ctx); err != nil {
				return err
			}
			return m.joinLoadBalancer(ctx)
		},
		ready: func(ctx context.Context) {
			m.setReady(true)
			m.syncMirrorPods(ctx)
		},
		restarts: &m.restarts,
	})
}

// keeper returns what the machine's supervisor loops share.
func (m *Machine) keeper() keeper {
	return keeper{log: m.c.host.opts.Log, what: "machine " + m.spec.Name, startTimeout: m.c.host.opts.StartTimeout,
		stop: m.stop, stopping: m.isStopping, mu: &m.mu}
}

// setReady records whether the kube-apiserver is ready and in the load
// balancer: its mirror Pod's readiness.
func (m *Machine) setReady(ready bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ready = ready
}

func (m *Machine) isReady() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.ready
}

// endSupervisor stops the supervisor and waits for it, when it runs.
func (m *Machine) endSupervisor() {
	m.signalStop()
	if m.c.Machine(m.spec.Name) == m {
		<-m.done
	}
}

// halt stops kube-controller-manager and kube-scheduler, then the
// kube-apiserver, and keeps the machine's files: the Host is closing.
func (m *Machine) halt(grace time.Duration) {
	m.endSupervisor()
	m.stopComponents(grace)
	proc := m.current()
	if proc != nil {
		proc.Stop(grace)
	}
}

// DeleteMachine deletes the machine as Cluster API's deletion of a
// control-plane machine ends on a real one: the load balancer drops it and
// its connections drain (Options.DrainTimeout), its mirror Pods are
// deleted, its kube-controller-manager and kube-scheduler and then its
// kube-apiserver are stopped (SIGTERM, Options.StopGrace, SIGKILL; the
// connections left after the drain are held until it turns requests away,
// see controlplane.StopDrained), its identity lease is removed, and its
// files and address are released. A worker's node agent is stopped, its
// containers removed (bex-node reset) and its files and address released.
// Deleting a machine that does not run only releases them.
func (c *Cluster) DeleteMachine(ctx context.Context, name string) error {
	if w := c.Worker(name); w != nil {
		c.deleteWorker(w)
	}
	m := c.Machine(name)
	if m != nil {
		tlsConfig, err := rest.TLSConfigFor(m.local)
		if err != nil {
			return fmt.Errorf("machine %s: the TLS settings of its kube-apiserver: %w", name, err)
		}
		m.endSupervisor()
		if c.lb.Remove(m.Addr()) {
			dctx, cancel := context.WithTimeout(ctx, c.host.opts.DrainTimeout)
			c.lb.WaitDrained(dctx, m.Addr())
			cancel()
		}
		if m.Running() {
			if err := m.deleteMirrorPods(ctx); err != nil {
				fmt.Fprintf(c.host.opts.Log, "machine %s: deleting its mirror Pods: %v\n", name, err)
			}
		}
		m.stopComponents(c.host.opts.StopGrace)
		controlplane.StopDrained(c.lb, m.Addr(), m.current(), c.host.opts.StopGrace, tlsConfig, c.host.opts.Log, "machine "+name)
		c.lb.CloseConns(m.Addr())
		c.mu.Lock()
		delete(c.machines, name)
		c.mu.Unlock()
		m.gone(ctx)
		fmt.Fprintf(c.host.opts.Log, "machine %s: deleted\n", name)
	}
	resetNodes(c.host.opts.NodeBinary, filepath.Join(c.dir, "machines", name), c.host.opts.Log)
	if err := os.RemoveAll(filepath.Join(c.dir, "machines", name)); err != nil {
		return err
	}
	c.release(name)
	return nil
}

// KillMachine loses the machine, as a host that dies: its kube-apiserver,
// kube-controller-manager and kube-scheduler get SIGKILL and are not
// restarted, the load balancer drops it, its Node and mirror Pods are
// marked not ready at once (what Kubernetes' node lifecycle controller does
// once the Node's lease is not renewed for its grace period), and its
// identity lease is removed at once. DeleteMachine removes what is left.
func (c *Cluster) KillMachine(ctx context.Context, name string) error {
	m := c.Machine(name)
	if m == nil {
		return fmt.Errorf("no machine %s runs", name)
	}
	m.endSupervisor()
	m.mu.Lock()
	m.lost = true
	proc := m.proc
	m.mu.Unlock()
	if proc != nil {
		proc.Kill()
	}
	for _, p := range m.componentProcs() {
		p.Kill()
	}
	c.lb.Remove(m.Addr())
	c.lb.CloseConns(m.Addr())
	fmt.Fprintf(c.host.opts.Log, "machine %s: lost (SIGKILL)\n", name)
	m.gone(ctx)
	if err := m.markNodeLost(ctx); err != nil {
		return fmt.Errorf("marking machine %s's Node not ready: %w", name, err)
	}
	return nil
}

// gone removes the identity lease of the machine's kube-apiserver through
// a surviving machine, once the server is known to be gone: its peers then
// forget it at once, and answer 404 for what only it served instead of 503
// while its lease stays (docs/upgrades.md, the 503 trap). It tries each
// peer that runs and is not itself stopping (a cluster being deleted stops
// them all), then the plane's own kube-apiservers of a cluster that took
// one over, and says so only when none could remove it.
func (m *Machine) gone(ctx context.Context) {
	var survivors []mvp.Server
	for _, p := range m.c.machinesExcept(m.spec.Name) {
		if !p.isStopping() && p.Running() {
			survivors = append(survivors, mvp.Server{Name: p.Name(), Config: p.AdminConfig()})
		}
	}
	survivors = append(survivors, m.c.planePeers()...)
	var errs []error
	for _, p := range survivors {
		cs, err := kubernetes.NewForConfig(p.Config)
		if err == nil {
			var removed []string
			if removed, err = mvp.RemoveIdentityLease(ctx, cs, m.spec.Name); err == nil {
				if len(removed) > 0 {
					fmt.Fprintf(m.c.host.opts.Log, "machine %s: its identity lease removed through %s\n", m.spec.Name, p.Name)
				}
				return
			}
		}
		errs = append(errs, fmt.Errorf("through %s: %w", p.Name, err))
	}
	if len(errs) > 0 {
		fmt.Fprintf(m.c.host.opts.Log, "machine %s: removing its identity lease: %v\n", m.spec.Name, errors.Join(errs...))
	}
}

// planePeers returns the running kube-apiservers of the plane the cluster
// took over that are not its machines; none for a cluster of its own.
func (c *Cluster) planePeers() []mvp.Server {
	if c.plane == nil || c.plane.Peers == nil {
		return nil
	}
	return c.plane.Peers()
}
