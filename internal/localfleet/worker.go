package localfleet

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"bex.co/bex/internal/childproc"
	"bex.co/bex/internal/kubeconfig"
	"bex.co/bex/internal/pki"
)

// WorkerSpec is what a worker machine is made from.
type WorkerSpec struct {
	// Name is the machine's Node name.
	Name string
	// Version is the Kubernetes version its node agent reports, such as
	// "v1.36.3" (the Machine's).
	Version string
	// ProviderID is what its Node's spec.providerID says; Cluster API's
	// Machine controller finds the Node by it.
	ProviderID string
	// BootstrapData is the cloud-config Cluster API's kubeadm bootstrap
	// provider made for it (a worker's kubeadm join), read on the first
	// start only.
	BootstrapData []byte
	// CA is the cluster's CA (Cluster API's <cluster>-ca Secret): the node's
	// client and serving certificates are issued from it, in place of the
	// kubelet's TLS bootstrap.
	CA *pki.KeyPair
}

// Worker is one worker machine of a local cluster: bex-node, the node
// agent, as a process of its own on the machine's loopback address, as a
// kubeadm worker runs its kubelet. It runs the Pods the cluster's
// scheduler binds to its Node as runc containers.
type Worker struct {
	c    *Cluster
	spec WorkerSpec
	ip   netip.Addr
	dir  string
	st   workerState

	node *rest.Config // system:node:NAME, through the load balancer

	supervised // bex-node
}

// workerState is what a worker's directory keeps between starts.
type workerState struct {
	Version string   `json:"version"`
	Args    []string `json:"args"`
}

// Node agent files under a worker's root, where a kubeadm worker keeps its
// kubelet's. test/platformtest's resetNodes finds workerStateDir by the
// same path.
const (
	workerKubeconfig = "etc/kubernetes/kubelet.conf"
	workerCAFile     = "etc/kubernetes/pki/ca.crt"
	workerServing    = "var/lib/kubelet/pki/kubelet"
	workerStateDir   = "var/lib/bex-node"
)

// IP returns the worker's address, its Node's InternalIP.
func (w *Worker) IP() netip.Addr { return w.ip }

// Name returns the worker's Node name.
func (w *Worker) Name() string { return w.spec.Name }

// Version returns the version its node agent reports.
func (w *Worker) Version() string { return w.spec.Version }

// Worker returns the named running worker, or nil.
func (c *Cluster) Worker(name string) *Worker {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.workers[name]
}

// StartWorker makes the worker machine and starts its node agent, unless
// it runs: on the first start it writes the bootstrap data's files under
// the machine's directory, checks the join's bootstrap token against the
// cluster (kubeadm join's discovery), issues the node's client and serving
// certificates from the cluster CA and writes the agent's flags; on a
// later start it reuses them. It returns once the agent reports its Node
// ready.
func (c *Cluster) StartWorker(ctx context.Context, spec WorkerSpec) (_ *Worker, err error) {
	spec.Version = strings.TrimPrefix(spec.Version, "v")
	if w := c.Worker(spec.Name); w != nil {
		return w, nil
	}
	if c.host.opts.NodeBinary == "" {
		return nil, fmt.Errorf("worker %s: the host has no bex-node binary (localfleet.Options.NodeBinary): worker machines run it as their node agent", spec.Name)
	}
	if spec.CA == nil {
		return nil, fmt.Errorf("worker %s: no cluster CA to issue the node's certificates from", spec.Name)
	}
	ip, err := c.slot(spec.Name)
	if err != nil {
		return nil, err
	}
	w := &Worker{c: c, spec: spec, ip: ip, dir: filepath.Join(c.dir, "machines", spec.Name),
		supervised: newSupervised()}
	if err := w.prepare(ctx); err != nil {
		return nil, fmt.Errorf("worker %s: %w", spec.Name, err)
	}
	defer func() {
		if err != nil {
			w.halt(10 * time.Second)
			err = fmt.Errorf("worker %s: %w", spec.Name, err)
		}
	}()
	if err := w.startProcess(ctx); err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.workers[spec.Name] = w
	c.mu.Unlock()
	go w.supervise()
	fmt.Fprintf(c.host.opts.Log, "worker %s: bex-node v%s on %s, its Node ready\n", spec.Name, spec.Version, w.ip)
	return w, nil
}

func (w *Worker) statePath() string { return filepath.Join(w.dir, "worker.json") }
func (w *Worker) root() string      { return filepath.Join(w.dir, "root") }
func (w *Worker) path(p string) string {
	return filepath.Join(w.root(), filepath.FromSlash(p))
}

// prepare does what "kubeadm join" does on a worker before its kubelet
// starts, or reads what it did on a first start.
func (w *Worker) prepare(ctx context.Context) error {
	if err := os.MkdirAll(w.dir, 0o700); err != nil {
		return err
	}
	data, err := os.ReadFile(w.statePath())
	switch {
	case err == nil:
		if err := json.Unmarshal(data, &w.st); err != nil {
			return fmt.Errorf("reading %s: %w", w.statePath(), err)
		}
		if w.st.Version != w.spec.Version {
			return fmt.Errorf("its directory holds a v%s worker, not v%s", w.st.Version, w.spec.Version)
		}
		return w.issue()
	case !errors.Is(err, os.ErrNotExist):
		return err
	}
	files, err := parseCloudConfig(w.spec.BootstrapData)
	if err != nil {
		return err
	}
	kc, err := readKubeadmConfig(files)
	if err != nil {
		return err
	}
	if err := kc.checkRole(true); err != nil {
		return err
	}
	if err := writeFiles(w.root(), files); err != nil {
		return err
	}
	if err := w.discover(ctx, kc.Join); err != nil {
		return err
	}
	if err := w.issue(); err != nil {
		return err
	}
	w.st = workerState{Version: w.spec.Version, Args: []string{
		"--node-name=" + w.spec.Name,
		"--address=" + w.ip.String(),
		"--kubeconfig=" + w.path(workerKubeconfig),
		"--tls-cert-file=" + w.path(workerServing+".crt"),
		"--tls-private-key-file=" + w.path(workerServing+".key"),
		"--client-ca-file=" + w.path(workerCAFile),
		"--kubelet-version=v" + w.spec.Version,
		"--provider-id=" + w.spec.ProviderID,
		"--state-dir=" + w.path(workerStateDir),
	}}
	w.st.Args = append(w.st.Args, kc.Join.NodeRegistration.workerKubeletArgs()...)
	data, _ = json.MarshalIndent(w.st, "", "  ")
	return os.WriteFile(w.statePath(), data, 0o600)
}

// discover checks the join's bootstrap token as "kubeadm join" does before
// the kubelet's TLS bootstrap: it reads the cluster's kubeadm-config with
// it, through the endpoint the JoinConfiguration names, trusting the
// cluster CA.
func (w *Worker) discover(ctx context.Context, join *joinConfiguration) error {
	_, err := join.readKubeadmConfigMap(ctx, w.spec.CA.CertPEM())
	return err
}

// issue writes the node agent's credentials, as the kubelet's TLS
// bootstrap would end: its kubeconfig (system:node:NAME in system:nodes,
// through the cluster's endpoint), its serving certificate for the
// machine's address and name, and the cluster CA its API trusts for
// clients (the kube-apiservers' kubelet client certificate).
func (w *Worker) issue() error {
	ca := w.spec.CA
	for _, d := range []string{filepath.Dir(w.path(workerKubeconfig)), filepath.Dir(w.path(workerCAFile)), filepath.Dir(w.path(workerServing))} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
	}
	if err := os.WriteFile(w.path(workerCAFile), ca.CertPEM(), 0o644); err != nil {
		return err
	}
	p := &nodePKI{dir: filepath.Dir(w.path(workerServing)), ca: ca}
	if _, err := p.ensure(filepath.Base(workerServing), ca, pki.Spec{
		CommonName:  w.spec.Name,
		DNSNames:    []string{w.spec.Name},
		IPAddresses: []net.IP{w.ip.AsSlice()},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}); err != nil {
		return err
	}
	var err error
	if w.node, err = p.clientConfig("https://"+w.c.Endpoint(), "system:node:"+w.spec.Name, "system:nodes"); err != nil {
		return err
	}
	return kubeconfig.Write(w.path(workerKubeconfig), "system:node:"+w.spec.Name, w.node)
}

// startProcess starts the node agent and waits until its Node is ready.
func (w *Worker) startProcess(ctx context.Context) error {
	argv := append([]string{w.c.host.opts.NodeBinary}, w.st.Args...)
	// bex-static lies beside bex-node (make build's bin/): static sites on
	// the run base find it there, as on the process runtime.
	bin, err := filepath.Abs(filepath.Dir(w.c.host.opts.NodeBinary))
	if err != nil {
		return err
	}
	argv = append(argv, "--platform-bin-dir="+bin)
	if w.c.host.opts.NodeRegistryConfig != "" {
		argv = append(argv, "--registry-config="+w.c.host.opts.NodeRegistryConfig)
	}
	started := time.Now()
	proc, err := childproc.Start(childproc.Options{Name: w.spec.Name, Args: argv,
		LogFile: filepath.Join(w.c.dir, "logs", w.spec.Name+".log"), LogMode: 0o644})
	if err != nil {
		return err
	}
	w.mu.Lock()
	w.proc = proc
	w.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, w.c.host.opts.StartTimeout)
	defer cancel()
	cs, err := kubernetes.NewForConfig(w.node)
	if err != nil {
		return err
	}
	if err := proc.WaitReady(ctx, "bex-node "+w.spec.Name, 200*time.Millisecond, func(ctx context.Context) error {
		return nodeReady(ctx, cs, w.spec.Name, started)
	}); err != nil {
		return fmt.Errorf("%w\nlast lines of its log:\n%s", err, proc.Tail(15))
	}
	return nil
}

// nodeReady checks that the Node is Ready, with a heartbeat from after
// since (the agent started then).
func nodeReady(ctx context.Context, cs kubernetes.Interface, name string, since time.Time) error {
	n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			if c.Status != corev1.ConditionTrue || c.LastHeartbeatTime.Time.Before(since.Truncate(time.Second)) {
				return fmt.Errorf("Node %s is not ready yet: %s", name, c.Message)
			}
			return nil
		}
	}
	return fmt.Errorf("Node %s reports no Ready condition yet", name)
}

// supervise restarts the node agent when it exits, as systemd restarts a
// kubelet, until the worker is stopped.
func (w *Worker) supervise() {
	defer close(w.done)
	keeper{log: w.c.host.opts.Log, what: "worker " + w.spec.Name, startTimeout: w.c.host.opts.StartTimeout,
		stop: w.stop, stopping: w.isStopping, mu: &w.mu}.keepRunning(restartable{
		name:     "bex-node",
		current:  w.current,
		start:    w.startProcess,
		restarts: &w.restarts,
	})
}

// halt stops the node agent (its containers stop with it) and keeps the
// worker's files.
func (w *Worker) halt(grace time.Duration) {
	w.signalStop()
	proc := w.current()
	if w.c.Worker(w.spec.Name) == w {
		<-w.done
	}
	if proc != nil {
		proc.Stop(grace)
	}
}

// deleteWorker stops the worker's node agent (SIGTERM, Options.StopGrace,
// SIGKILL; its containers run on until DeleteMachine resets the node) and
// forgets it. Cluster API's Machine
// controller has drained its Node before and deletes it after.
func (c *Cluster) deleteWorker(w *Worker) {
	w.halt(c.host.opts.StopGrace)
	c.mu.Lock()
	delete(c.workers, w.spec.Name)
	c.mu.Unlock()
	fmt.Fprintf(c.host.opts.Log, "worker %s: deleted\n", w.spec.Name)
}

// resetNodes runs "bex-node reset" for every machine directory that
// machines (a glob) names whose node agent left a state directory: the
// containers of a node agent outlive its stop, as a kubelet's do, and
// deleting the machine ends them, as deleting a real one does.
func resetNodes(nodeBinary, machines string, log io.Writer) {
	if nodeBinary == "" {
		return
	}
	dirs, _ := filepath.Glob(filepath.Join(machines, "root", filepath.FromSlash(workerStateDir)))
	for _, d := range dirs {
		if out, err := exec.Command(nodeBinary, "reset", "--state-dir="+d).CombinedOutput(); err != nil {
			fmt.Fprintf(log, "removing the containers of %s: bex-node reset: %v: %s\n", d, err, out)
		}
	}
}

// checkRole says whether the kubeadm configuration is a worker's join
// (worker) or a control-plane machine's init or join.
func (kc *kubeadmConfig) checkRole(worker bool) error {
	isWorker := kc.Join != nil && kc.Join.ControlPlane == nil
	switch {
	case worker && !isWorker:
		return errors.New("the bootstrap data is a control-plane machine's kubeadm init or join, not a worker's join: a control-plane machine runs a kube-apiserver (Cluster.StartMachine)")
	case !worker && isWorker:
		return errors.New("the kubeadm JoinConfiguration is a worker's (no controlPlane): a worker machine runs bex-node (Cluster.StartWorker), not a kube-apiserver")
	}
	return nil
}
