package capi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"bex.co/bex/internal/childproc"
	"bex.co/bex/internal/kubebin"
	"bex.co/bex/internal/kubeconfig"
)

// Options configure the managers.
type Options struct {
	// Kubeconfig is the management apiserver's kubeconfig file, with the
	// rights of cluster-admin. The managers and Start use it.
	Kubeconfig string
	// Dir keeps the webhook CA, the serving certificates, the manifests as
	// applied and the managers' logs. It is created with mode 0700.
	Dir string
	// Binaries builds or finds the managers and Cluster API's source. Nil
	// means a Builder with the default cache directory that reports
	// progress to Log.
	Binaries *kubebin.Builder
	// Log receives what Start does (not the managers' own logs, which go to
	// Dir/logs). Nil discards.
	Log io.Writer
	// StartTimeout bounds how long each manager may take to answer /readyz;
	// zero means two minutes.
	StartTimeout time.Duration
	// StopGrace is how long Stop waits after SIGTERM before SIGKILL; zero
	// means 10 seconds.
	StopGrace time.Duration
}

// component is one of Cluster API's managers and where its manifests are.
type component struct {
	name   string // the kubebin tool, and the manager's name here
	dir    string // its directory in the cluster-api module
	prefix string // of its webhook configurations' names, as clusterctl's
}

// components lists the managers in the order Start starts them: the core
// manager first, since it owns the Cluster every other object hangs off.
func components() []component {
	return []component{
		{name: kubebin.CAPIManager, dir: "core", prefix: "capi-"},
		{name: kubebin.CAPIKubeadmBootstrapManager, dir: "bootstrap/kubeadm", prefix: "capi-kubeadm-bootstrap-"},
		{name: kubebin.CAPIKubeadmControlPlaneManager, dir: "controlplane/kubeadm", prefix: "capi-kubeadm-control-plane-"},
	}
}

// featureGates are given to every manager, so that an upstream change of a
// default does not change what runs.
const featureGates = "MachinePool=false,ClusterTopology=false,RuntimeSDK=false,InPlaceUpdates=false,MachineTaintPropagation=false"

// Manager is one running Cluster API manager.
type Manager struct {
	// Name is the manager's kubebin tool name, such as kubebin.CAPIManager.
	Name string
	// WebhookPort is the port its webhooks listen on, on every address.
	WebhookPort int
	// HealthAddr is the host:port of its /healthz and /readyz.
	HealthAddr string
	// LogFile is where its output goes.
	LogFile string
	// Args is its command line, the binary first.
	Args []string

	proc *childproc.Process
}

// WebhookURL returns the URL of path on the manager's webhook server.
func (m *Manager) WebhookURL(path string) string {
	return "https://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(m.WebhookPort)) + path
}

// Running reports whether the manager's process is alive. A manager that
// exited is not restarted.
func (m *Manager) Running() bool { return m.proc != nil && !m.proc.Exited() }

// PID returns the manager's process ID.
func (m *Manager) PID() int { return m.proc.PID() }

// Managers are the running Cluster API managers.
type Managers struct {
	grace    time.Duration
	managers []*Manager
	stopOnce sync.Once
}

// Start installs the managers' CRDs, starts the managers, waits until each
// answers /readyz, registers their webhooks and waits until the apiserver
// calls them. The managers keep running
// after ctx ends; Stop ends them. They are killed if this process dies.
func Start(ctx context.Context, opts Options) (_ *Managers, err error) {
	if opts.Kubeconfig == "" {
		return nil, errors.New("capi: the management kubeconfig is empty")
	}
	if opts.Dir == "" {
		return nil, errors.New("capi: the directory is empty")
	}
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = 2 * time.Minute
	}
	if opts.StopGrace <= 0 {
		opts.StopGrace = 10 * time.Second
	}
	if opts.Binaries == nil {
		if opts.Binaries, err = kubebin.NewBuilder(kubebin.Options{Progress: opts.Log}); err != nil {
			return nil, err
		}
	}
	kubeconfigPath, err := filepath.Abs(opts.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("resolving the kubeconfig's path: %w", err)
	}
	cfg, err := kubeconfig.Load(kubeconfigPath, "management cluster")
	if err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("resolving the directory: %w", err)
	}
	for _, d := range []string{dir, filepath.Join(dir, "logs")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("creating %s: %w", d, err)
		}
	}

	// Build (or find) every binary before anything is installed, so that a
	// first build's minutes do not pass with webhooks pointing nowhere.
	comps := components()
	bins := make([]string, len(comps))
	for i, c := range comps {
		if bins[i], err = opts.Binaries.Tool(ctx, c.name); err != nil {
			return nil, err
		}
	}
	src, err := opts.Binaries.ToolModuleDir(ctx, kubebin.CAPIManager, kubebin.CAPIModule)
	if err != nil {
		return nil, err
	}

	ca, err := loadOrCreateCA(filepath.Join(dir, "pki"))
	if err != nil {
		return nil, err
	}
	ms := &Managers{grace: opts.StopGrace}
	defer func() {
		if err != nil {
			ms.Stop()
		}
	}()
	// Every manager's webhook and health ports are picked at once, on every
	// address, so that no two of them are the same port.
	ports, err := childproc.FreePorts("", 2*len(comps))
	if err != nil {
		return nil, err
	}
	for i, c := range comps {
		m := &Manager{Name: c.name, LogFile: filepath.Join(dir, "logs", c.name+".log")}
		m.WebhookPort = ports[2*i]
		m.HealthAddr = net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[2*i+1]))
		certDir := filepath.Join(dir, c.name, "serving-certs")
		if err := issueServingCert(ca, certDir); err != nil {
			return nil, fmt.Errorf("%s: %w", c.name, err)
		}
		m.Args = []string{bins[i],
			"--kubeconfig=" + kubeconfigPath,
			"--leader-elect=false",
			"--webhook-port=" + strconv.Itoa(m.WebhookPort),
			"--webhook-cert-dir=" + certDir,
			"--health-addr=" + m.HealthAddr,
			"--diagnostics-address=0",
			"--feature-gates=" + featureGates,
			"--skip-crd-migration-phases=StorageVersionMigration,CleanupManagedFields",
		}
		ms.managers = append(ms.managers, m)
	}

	manifests := filepath.Join(dir, "manifests")
	if err := installCRDs(ctx, cfg, src, manifests, ms.managers, ca); err != nil {
		return nil, err
	}
	fmt.Fprintf(opts.Log, "installed Cluster API %s's CRDs\n", kubebin.ToolVersion(kubebin.CAPIManager))
	for _, m := range ms.managers {
		if err := m.start(dir); err != nil {
			return nil, err
		}
	}
	for _, m := range ms.managers {
		if err := m.waitReady(ctx, opts.StartTimeout); err != nil {
			return nil, err
		}
		fmt.Fprintf(opts.Log, "%s ready: webhooks on port %d, log %s\n", m.Name, m.WebhookPort, m.LogFile)
	}
	if err := registerWebhooks(ctx, cfg, src, manifests, ms.managers, ca); err != nil {
		return nil, err
	}
	if err := waitWebhooksServed(ctx, cfg, metav1.NamespaceDefault, opts.StartTimeout); err != nil {
		return nil, err
	}
	fmt.Fprintf(opts.Log, "Cluster API's webhooks in force\n")
	return ms, nil
}

// List returns the managers in the order they were started.
func (ms *Managers) List() []*Manager { return append([]*Manager(nil), ms.managers...) }

// Manager returns the named manager (a kubebin tool name), or nil.
func (ms *Managers) Manager(name string) *Manager {
	for _, m := range ms.managers {
		if m.Name == name {
			return m
		}
	}
	return nil
}

// Stop sends SIGTERM to every manager at once, SIGKILL to those still
// running after the grace period, and waits for them to exit. It is safe to
// call more than once.
func (ms *Managers) Stop() {
	ms.stopOnce.Do(func() {
		var wg sync.WaitGroup
		for _, m := range ms.managers {
			if m.proc == nil {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				m.stop(ms.grace)
			}()
		}
		wg.Wait()
	})
}

// start starts the manager with its output appended to its log, in its own
// process group, killed if this process dies.
func (m *Manager) start(home string) (err error) {
	m.proc, err = childproc.Start(childproc.Options{
		Name: m.Name, Args: m.Args, LogFile: m.LogFile,
		Env: []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home},
	})
	return err
}

// waitReady polls the manager's /readyz until it answers 200; it checks
// that the webhook server has started.
func (m *Manager) waitReady(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client := &http.Client{Timeout: 2 * time.Second}
	url := "http://" + m.HealthAddr + "/readyz"
	err := m.proc.WaitReady(ctx, m.Name, 200*time.Millisecond, func(ctx context.Context) error {
		return childproc.HTTPOK(ctx, client, url)
	})
	if err != nil {
		return fmt.Errorf("%w; its log: %s\n%s", err, m.LogFile, m.proc.Tail(20))
	}
	return nil
}

// stop sends SIGTERM to the manager's process group, SIGKILL after grace,
// and waits for it to exit.
func (m *Manager) stop(grace time.Duration) { m.proc.Stop(grace) }
