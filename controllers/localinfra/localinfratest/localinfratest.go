// Package localinfratest starts, for tests, a management cluster (a real
// kube-apiserver) with the real Cluster API managers (internal/capi) and
// the local infrastructure provider (controllers/localinfra) running on a
// controller manager, on which a test may set up more controllers.
package localinfratest

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	fleetv1 "bex.co/bex/apis/fleet/v1alpha1"
	infrav1 "bex.co/bex/apis/infrastructure/v1alpha1"
	"bex.co/bex/controllers/localinfra"
	"bex.co/bex/deploy"
	localinfracrds "bex.co/bex/deploy/localinfra-crds"
	"bex.co/bex/internal/capi"
	"bex.co/bex/internal/controlplane"
	"bex.co/bex/internal/controlplane/cptest"
	"bex.co/bex/internal/kubeapply"
	"bex.co/bex/internal/kubebin"
	"bex.co/bex/internal/localfleet"
	"bex.co/bex/internal/upgrade/preflight"
	"bex.co/bex/test/platformtest"
)

// Options configure Start.
type Options struct {
	// Version is the management kube-apiserver's, a pinned one; empty
	// means kubebin.DefaultKubeVersion.
	Version string
	// Setup, when set, registers more controllers on the manager before
	// it starts.
	Setup func(mgr ctrl.Manager) error
	// Host configures the provider's processes; Dir, Binaries and Log are
	// filled in.
	Host localfleet.Options
}

// Fleet is a running management side.
type Fleet struct {
	// Client reads and writes the management cluster directly.
	Client client.WithWatch
	Mgmt   *controlplane.ControlPlane
	Host   *localfleet.Host
	// Dir holds the managers' files (capi/) and the clusters' (fleet/).
	Dir string
	// SecretLists records the lists and watches of Secrets with their
	// data that the manager of the local provider (and of Setup's
	// controllers) made: none, when its cache holds no Secret.
	SecretLists *platformtest.SecretLists
}

// Scheme returns a scheme with what the fleet's controllers read.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, clusterv1.AddToScheme,
		controlplanev1.AddToScheme, bootstrapv1.AddToScheme, infrav1.AddToScheme, fleetv1.AddToScheme} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return s
}

// Start starts the management cluster with the platform's CRDs, the
// Cluster API managers and the local provider, and stops everything at the
// end of the test (the clusters' processes too).
func Start(t *testing.T, opts Options) *Fleet {
	t.Helper()
	ctrl.SetLogger(logr.Discard())
	mgmt := cptest.StartBare(t, controlplane.APIServerSpec{Version: opts.Version})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if _, err := kubeapply.InstallCRDs(ctx, mgmt.RESTConfig(), deploy.CRDs()); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ms, err := capi.Start(ctx, capi.Options{Kubeconfig: mgmt.KubeconfigPath(), Dir: filepath.Join(dir, "capi"), Log: os.Stderr})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ms.Stop()
		if t.Failed() {
			for _, m := range ms.List() {
				LogTail(t, m.Name, m.LogFile)
			}
		}
	})
	if _, err := kubeapply.InstallCRDs(ctx, mgmt.RESTConfig(), localinfracrds.CRDs()); err != nil {
		t.Fatal(err)
	}
	bin, err := kubebin.NewBuilder(kubebin.Options{Progress: os.Stderr})
	if err != nil {
		t.Fatal(err)
	}
	hostOpts := opts.Host
	hostOpts.Dir, hostOpts.Binaries, hostOpts.Log = filepath.Join(dir, "fleet"), bin, os.Stderr
	if hostOpts.StopGrace == 0 {
		hostOpts.StopGrace = 10 * time.Second
	}
	host, err := localfleet.NewHost(hostOpts)
	if err != nil {
		t.Fatal(err)
	}
	scheme := Scheme()
	lists := &platformtest.SecretLists{}
	mgrCfg := rest.CopyConfig(mgmt.RESTConfig())
	mgrCfg.Wrap(lists.Wrap)
	mgr, err := ctrl.NewManager(mgrCfg, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"},
		Controller: config.Controller{SkipNameValidation: ptr.To(true)}})
	if err != nil {
		t.Fatal(err)
	}
	if err := (&localinfra.ClusterReconciler{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Host: host}).SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	if err := (&localinfra.MachineReconciler{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Host: host}).SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	if opts.Setup != nil {
		if err := opts.Setup(mgr); err != nil {
			t.Fatal(err)
		}
	}
	mctx, mcancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = mgr.Start(mctx) }()
	t.Cleanup(func() { mcancel(); <-done; host.Close(); host.ResetNodes() })
	c, err := client.NewWithWatch(mgmt.RESTConfig(), client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return &Fleet{Client: c, Mgmt: mgmt, Host: host, Dir: dir, SecretLists: lists}
}

// CreateCluster creates the objects of a local cluster in a free address
// block and returns them (localinfra.ClusterObjects). A block is free
// until the cluster's load balancer listens in it, so test processes that
// create clusters at the same moment would pick the same one: picking,
// creating and the load balancer's start are serialised across processes
// by a file lock.
func (f *Fleet) CreateCluster(t *testing.T, o localinfra.ClusterOptions) []client.Object {
	t.Helper()
	unlock := platformtest.LockBlocks(t)
	defer unlock()
	if !o.Block.IsValid() {
		block, err := localfleet.FreeBlock(nil)
		if err != nil {
			t.Fatal(err)
		}
		o.Block = block
	}
	objs := localinfra.ClusterObjects(o)
	for _, obj := range objs {
		if err := f.Client.Create(context.Background(), obj); err != nil {
			t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
		}
	}
	if o.Plane != "" {
		return objs // the plane's load balancer listens
	}
	// The LocalCluster's endpoint: the block's first address.
	endpoint := netip.AddrPortFrom(o.Block.Addr().Next(), localfleet.APIServerPort).String()
	platformtest.Eventually(t, 2*time.Minute, "the load balancer of "+o.Name+" to listen on "+endpoint, func(ctx context.Context) error {
		conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", endpoint)
		if err != nil {
			return err
		}
		return conn.Close()
	})
	return objs
}

// WireMVPArgs returns the apiserver flags the wire-MVP step would give a
// fresh cluster of o (preflight.WireMVPPatch, with the hand-off a
// LocalCluster's load balancer does): a cluster created with them is
// wired from the start.
func WireMVPArgs(o localinfra.ClusterOptions) []bootstrapv1.Arg {
	if !o.Block.IsValid() {
		o.Block = netip.MustParsePrefix("127.77.0.0/24") // any: the flags do not name it
	}
	for _, obj := range localinfra.ClusterObjects(o) {
		if kcp, ok := obj.(*controlplanev1.KubeadmControlPlane); ok {
			return preflight.WireMVPPatch(kcp, o.Version, true)
		}
	}
	panic("localinfra.ClusterObjects wrote no KubeadmControlPlane")
}

// WorkloadConfig returns the admin config of a workload cluster from
// Cluster API's <cluster>-kubeconfig Secret.
func (f *Fleet) WorkloadConfig(t *testing.T, ns, name string) *rest.Config {
	t.Helper()
	s := &corev1.Secret{}
	if err := f.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name + "-kubeconfig"}, s); err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(s.Data["value"])
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// WorkloadClient is WorkloadConfig's clientset.
func (f *Fleet) WorkloadClient(t *testing.T, ns, name string) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(f.WorkloadConfig(t, ns, name))
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// LogTail logs the last 40 lines of a file.
func LogTail(t *testing.T, name, file string) {
	data, err := os.ReadFile(file)
	if err != nil {
		t.Logf("%s: %v", name, err)
		return
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > 40 {
		lines = lines[len(lines)-40:]
	}
	t.Logf("%s (%s):\n%s", name, file, strings.Join(lines, "\n"))
}

// WaitControlPlane waits until the cluster's KubeadmControlPlane reports
// replicas ready, up-to-date replicas of version (such as "v1.36.3"), and
// every control-plane LocalMachine of the cluster runs it and is ready.
func (f *Fleet) WaitControlPlane(t *testing.T, ns, cluster, version string, replicas int32, timeout time.Duration) {
	t.Helper()
	platformtest.Eventually(t, timeout, fmt.Sprintf("%d ready machines of %s", replicas, version), func(ctx context.Context) error {
		kcp := &controlplanev1.KubeadmControlPlane{}
		if err := f.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: cluster + "-control-plane"}, kcp); err != nil {
			return err
		}
		st := kcp.Status
		if deref(st.ReadyReplicas) != replicas || deref(st.UpToDateReplicas) != replicas || deref(st.Replicas) != replicas || st.ObservedGeneration != kcp.Generation {
			return fmt.Errorf("KubeadmControlPlane replicas %d, ready %d, up to date %d; conditions %s", deref(st.Replicas), deref(st.ReadyReplicas), deref(st.UpToDateReplicas), falseConditions(st.Conditions))
		}
		var lms infrav1.LocalMachineList
		if err := f.Client.List(ctx, &lms, client.InNamespace(ns), client.MatchingLabels{clusterv1.ClusterNameLabel: cluster},
			client.HasLabels{clusterv1.MachineControlPlaneLabel}); err != nil {
			return err
		}
		if int32(len(lms.Items)) != replicas {
			return fmt.Errorf("%d LocalMachines", len(lms.Items))
		}
		for _, lm := range lms.Items {
			if lm.Status.Version != version {
				return fmt.Errorf("LocalMachine %s runs %s", lm.Name, lm.Status.Version)
			}
			if err := platformtest.HasCondition(lm.Status.Conditions, infrav1.ReadyCondition, metav1.ConditionTrue, ""); err != nil {
				return fmt.Errorf("LocalMachine %s: %w", lm.Name, err)
			}
		}
		return nil
	})
}

func deref(p *int32) int32 {
	if p == nil {
		return -1
	}
	return *p
}

// falseConditions lists the conditions that are not True.
func falseConditions(cs []metav1.Condition) string {
	var out []string
	for _, c := range cs {
		if c.Status != metav1.ConditionTrue {
			out = append(out, fmt.Sprintf("%s=%s %s: %s", c.Type, c.Status, c.Reason, c.Message))
		}
	}
	sort.Strings(out)
	return strings.Join(out, "; ")
}
