package localfleet

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"bex.co/bex/internal/childproc"
	"bex.co/bex/internal/controlplane"
	"bex.co/bex/internal/kubeconfig"
)

// What a kubeadm control-plane node runs beside its kube-apiserver as
// static Pods: kube-controller-manager and kube-scheduler of the node's
// version, with kubeadm's flags, each with a kubeconfig of its own identity
// for the node's own kube-apiserver (kubeadm's controller-manager.conf and
// scheduler.conf), and the kubelet's probes of their /healthz.

// kubernetesDir is kubeadm's directory of a node's kubeconfigs.
const kubernetesDir = "/etc/kubernetes"

// component is a control-plane component a machine runs beside its
// kube-apiserver.
type component struct {
	name string
	// kubeconfig is its kubeconfig's name in kubernetesDir; user is the
	// identity in it, which the bootstrap RBAC policy binds to its role.
	kubeconfig, user string
	// port is its --secure-port unless extraArgs set one, where the
	// kubelet's probes ask its /healthz.
	port int
}

var (
	kubeControllerManager = component{name: "kube-controller-manager", kubeconfig: "controller-manager.conf", user: "system:kube-controller-manager", port: 10257}
	kubeScheduler         = component{name: "kube-scheduler", kubeconfig: "scheduler.conf", user: "system:kube-scheduler", port: 10259}
)

// componentsBesideAPIServer are the components a machine runs beside its
// kube-apiserver, in the order they start.
var componentsBesideAPIServer = []component{kubeControllerManager, kubeScheduler}

// componentProc is one component of one machine.
type componentProc struct {
	component
	bin     string
	args    []string
	healthz string // the URL of its /healthz

	proc *childproc.Process // under the machine's mu
}

// componentArgs returns the flags of the components beside the
// kube-apiserver, by name, as machineState keeps them.
func componentArgs(cc *clusterConfiguration, root, ip string) map[string][]string {
	return map[string][]string{
		kubeControllerManager.name: controllerManagerArgs(cc, root, ip),
		kubeScheduler.name:         schedulerArgs(cc, root, ip),
	}
}

// healthzURL is where the kubelet's probes ask a component's /healthz: at
// its --bind-address (the machine's address when that is unspecified) and
// its --secure-port, port when it has none.
func healthzURL(args []string, ip netip.Addr, port int) string {
	host, p := ip.String(), strconv.Itoa(port)
	if v, ok := flagValue(args, "bind-address"); ok {
		if a, err := netip.ParseAddr(v); err == nil && !a.IsUnspecified() {
			host = a.String()
		}
	}
	if v, ok := flagValue(args, "secure-port"); ok {
		p = v
	}
	return "https://" + net.JoinHostPort(host, p) + "/healthz"
}

// probeClient asks as the kubelet's HTTPS probes do: without verifying
// the serving certificate (the components' are self-signed) and without
// keeping the connection.
func probeClient() *http.Client {
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, DisableKeepAlives: true}}
}

// writeKubeconfigs writes the components' kubeconfigs under the machine's
// root as kubeadm writes controller-manager.conf and scheduler.conf: a
// client certificate of the cluster CA for the component's user, and the
// machine's own kube-apiserver as the server.
func (m *Machine) writeKubeconfigs() error {
	for _, c := range componentsBesideAPIServer {
		cfg, err := m.pki.clientConfig("https://"+m.Addr(), c.user)
		if err != nil {
			return fmt.Errorf("issuing the client certificate of %s: %w", c.name, err)
		}
		if err := kubeconfig.Write(filepath.Join(m.root(), filepath.FromSlash(kubernetesDir), c.kubeconfig), c.user, cfg); err != nil {
			return err
		}
	}
	return nil
}

// components returns the machine's components beside its kube-apiserver,
// of its version, not started.
func (m *Machine) components(ctx context.Context) ([]*componentProc, error) {
	var out []*componentProc
	for _, c := range componentsBesideAPIServer {
		bin, err := m.c.host.opts.Binaries.KubeComponent(ctx, c.name, m.spec.Version)
		if err != nil {
			return nil, err
		}
		args := m.st.ComponentArgs[c.name]
		out = append(out, &componentProc{component: c, bin: bin, args: args, healthz: healthzURL(args, m.ip, c.port)})
	}
	return out, nil
}

// startComponents starts the components, in the machine's UTS namespace
// as its kube-apiserver; waitComponents waits until they are ready.
func (m *Machine) startComponents() error {
	for _, c := range m.comps {
		if err := m.startComponent(c); err != nil {
			return err
		}
	}
	return nil
}

// waitComponents waits until every component answers /healthz, within
// Options.StartTimeout.
func (m *Machine) waitComponents(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, m.c.host.opts.StartTimeout)
	defer cancel()
	for _, c := range m.comps {
		if err := m.waitComponent(ctx, c); err != nil {
			return err
		}
	}
	return nil
}

func (m *Machine) startComponent(c *componentProc) error {
	argv := append(append(controlplane.HostnameCommand(m.spec.Name), c.bin), c.args...)
	proc, err := childproc.Start(childproc.Options{Name: c.name + " " + m.spec.Name, Args: argv,
		LogFile: filepath.Join(m.c.dir, "logs", m.spec.Name+"-"+c.name+".log"), LogMode: 0o644})
	if err != nil {
		return err
	}
	m.mu.Lock()
	c.proc = proc
	m.mu.Unlock()
	return nil
}

// waitComponent waits until the component's /healthz answers, as the
// kubelet's probe (kubeadm's probes of both components ask /healthz).
func (m *Machine) waitComponent(ctx context.Context, c *componentProc) error {
	m.mu.Lock()
	proc := c.proc
	m.mu.Unlock()
	if err := proc.WaitReady(ctx, c.name+" "+m.spec.Name, 200*time.Millisecond, func(ctx context.Context) error {
		return childproc.HTTPOK(ctx, m.probe, c.healthz)
	}); err != nil {
		return fmt.Errorf("%w\nlast lines of its log:\n%s", err, proc.Tail(15))
	}
	return nil
}

// componentReady reports whether the named component runs and answers
// /healthz: its mirror Pod's readiness.
func (m *Machine) componentReady(ctx context.Context, name string) bool {
	for _, c := range m.comps {
		if c.name != name {
			continue
		}
		m.mu.Lock()
		proc := c.proc
		m.mu.Unlock()
		return proc != nil && !proc.Exited() && childproc.HTTPOK(ctx, m.probe, c.healthz) == nil
	}
	return false
}

// superviseComponent restarts the component when it exits, whatever the
// kube-apiserver does, and reports its mirror Pod's readiness.
func (m *Machine) superviseComponent(c *componentProc) {
	report := func(ctx context.Context) { m.syncMirrorPods(ctx) } // retried on the next tick
	m.keeper().keepRunning(restartable{
		name: c.name,
		current: func() *childproc.Process {
			m.mu.Lock()
			defer m.mu.Unlock()
			return c.proc
		},
		exited: report,
		start: func(ctx context.Context) error {
			if err := m.startComponent(c); err != nil {
				return err
			}
			return m.waitComponent(ctx, c)
		},
		ready: report,
	})
}

// stopComponents stops the components at once (SIGTERM, grace, SIGKILL)
// and waits for them.
func (m *Machine) stopComponents(grace time.Duration) {
	var wg sync.WaitGroup
	for _, p := range m.componentProcs() {
		wg.Add(1)
		go func() { defer wg.Done(); p.Stop(grace) }()
	}
	wg.Wait()
}

// componentProcs returns the components' processes that were started.
func (m *Machine) componentProcs() []*childproc.Process {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*childproc.Process
	for _, c := range m.comps {
		if c.proc != nil {
			out = append(out, c.proc)
		}
	}
	return out
}
