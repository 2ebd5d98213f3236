package node

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-containerregistry/pkg/authn"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"bex.co/bex/internal/loopfs"
	"bex.co/bex/internal/sandbox"
)

// DefaultPort is the port of the agent's API, the kubelet's.
const DefaultPort = 10250

// Options configure an Agent. Zero fields take the defaults in brackets.
type Options struct {
	// Client reaches the cluster's apiserver as the node
	// (system:node:NodeName in system:nodes).
	Client kubernetes.Interface
	// NodeName is the Node's name and hostname.
	NodeName string
	// Address is the Node's InternalIP; the agent's API listens on it.
	Address netip.Addr
	// Port is the agent's API port [DefaultPort].
	Port int
	// ServingCert is the agent API's certificate (for Address); ClientCAs
	// sign the certificates of its clients (the apiserver's kubelet client).
	ServingCert tls.Certificate
	ClientCAs   *x509.CertPool
	// Sandbox runs the containers.
	Sandbox *sandbox.Manager
	// StateDir keeps the unpacked images and the containers' logs.
	StateDir string
	// PlatformBinDir is the platform's binary directory (bex-static, the
	// web process of static sites): a container on the run base (a
	// stack image, of which only the app's layer is unpacked) has it at
	// the end of its PATH, as on the process runtime; an image with its
	// own root filesystem does not. Sandbox must show it read-only
	// (sandbox.Options.ReadOnlyPaths) [none].
	PlatformBinDir string
	// Keychain holds the node's own registry credentials, tried after a
	// Pod's image pull secrets [none].
	Keychain authn.Keychain
	// Capacity is what the Node offers [this machine's CPUs and memory,
	// the size of StateDir's file system as ephemeral-storage, 110 pods].
	Capacity corev1.ResourceList
	// KubeletVersion is reported in the Node's nodeInfo; Cluster API and
	// the version skew policy read it.
	KubeletVersion string
	// ProviderID, Labels and Taints are set on the Node when it
	// registers, as the kubelet's --provider-id, --node-labels and
	// --register-with-taints; a Node registered by an earlier run keeps
	// what it has, as with the kubelet.
	ProviderID string
	Labels     map[string]string
	Taints     []corev1.Taint
	// RestartBackoff is the first delay before a crashed container starts
	// again; it doubles up to five minutes [10s].
	RestartBackoff time.Duration
	// LeaseDuration is the Node Lease's duration, renewed four times in it
	// [40s]. StatusInterval is how often the Node's status is posted [1m].
	LeaseDuration, StatusInterval time.Duration
	// ImageMinimumGCAge is how long an unpacked image no container uses
	// stays before it is deleted, the kubelet's --image-minimum-gc-age
	// [2m]; ImageGCPeriod is how often unused images are looked for [1m].
	ImageMinimumGCAge, ImageGCPeriod time.Duration
	// AttachWait is how long the process of a container made with stdin
	// and stdinOnce waits for its first attach before it starts without
	// one [1m].
	AttachWait time.Duration
	Log        logr.Logger
}

func (o *Options) complete() error {
	if o.Client == nil || o.Sandbox == nil {
		return errors.New("node: a client and a sandbox are required")
	}
	if o.NodeName == "" || !o.Address.IsValid() {
		return errors.New("node: a node name and an address are required")
	}
	if o.StateDir == "" {
		return errors.New("node: a state directory is required")
	}
	if len(o.ServingCert.Certificate) == 0 || o.ClientCAs == nil {
		return errors.New("node: the API's serving certificate and client CAs are required")
	}
	if o.Port == 0 {
		o.Port = DefaultPort
	}
	capacity := machineCapacity(o.StateDir)
	for k, v := range o.Capacity {
		capacity[k] = v
	}
	o.Capacity = capacity
	if o.RestartBackoff <= 0 {
		o.RestartBackoff = 10 * time.Second
	}
	if o.LeaseDuration <= 0 {
		o.LeaseDuration = 40 * time.Second
	}
	if o.StatusInterval <= 0 {
		o.StatusInterval = time.Minute
	}
	if o.ImageMinimumGCAge <= 0 {
		o.ImageMinimumGCAge = 2 * time.Minute
	}
	if o.ImageGCPeriod <= 0 {
		o.ImageGCPeriod = time.Minute
	}
	if o.AttachWait <= 0 {
		o.AttachWait = time.Minute
	}
	return nil
}

// Agent runs the Pods bound to one Node.
type Agent struct {
	opts     Options
	images   *imageStore
	events   record.EventBroadcaster
	recorder record.EventRecorder
	nodeInfo corev1.NodeSystemInfo // what runs the node, read once

	logs    *logStore
	volumes *volumeStore
	probes  *http.Client

	mu      sync.Mutex
	workers map[types.UID]*podWorker
	// done holds the Pods whose worker finished (refused, stopped,
	// removed) until they are gone, so that a late event does not run
	// them again.
	done map[types.UID]bool
	// kept are the containers an earlier agent left running, by Pod UID,
	// until the Pod's worker adopts them or, once every Pod was seen,
	// they are removed.
	kept map[types.UID]*kept
	wg   sync.WaitGroup
}

// New returns an Agent for opts; Run starts it.
func New(opts Options) (*Agent, error) {
	if err := opts.complete(); err != nil {
		return nil, err
	}
	for _, d := range []string{"images", "pods", "volumes", "containers"} {
		if err := os.MkdirAll(filepath.Join(opts.StateDir, d), 0o700); err != nil {
			return nil, err
		}
	}
	b := record.NewBroadcaster()
	a := &Agent{
		opts:     opts,
		images:   newImageStore(filepath.Join(opts.StateDir, "images"), opts.Keychain),
		events:   b,
		recorder: b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "bex-node", Host: opts.NodeName}),
		nodeInfo: nodeInfo(opts.KubeletVersion, opts.Sandbox),
		logs:     &logStore{dir: filepath.Join(opts.StateDir, "pods")},
		volumes:  &volumeStore{dir: filepath.Join(opts.StateDir, "volumes")},
		probes:   newProbeClient(),
		workers:  map[types.UID]*podWorker{},
		done:     map[types.UID]bool{},
	}
	// The containers an earlier agent left running: those still of a
	// Pod bound here are adopted once the Pods are seen (Run).
	var err error
	if a.kept, err = a.loadKept(); err != nil {
		return nil, fmt.Errorf("reading the containers an earlier agent left: %w", err)
	}
	keepVolumes, keepImages := map[string]bool{}, map[string]bool{}
	for uid, k := range a.kept {
		keepVolumes[string(uid)], keepImages[k.ImageDir] = true, true
	}
	// The volumes of the other Pods an earlier agent ran: they run anew.
	if err := a.volumes.sweep(keepVolumes); err != nil {
		return nil, fmt.Errorf("removing the volumes of earlier pods: %w", err)
	}
	// The other images an earlier agent unpacked: this one's store
	// knows none of them.
	swept, err := sweepImages(filepath.Join(opts.StateDir, "images"), keepImages)
	if err != nil {
		return nil, fmt.Errorf("removing the images of an earlier agent: %w", err)
	}
	if swept > 0 {
		opts.Log.Info("Removed the images of an earlier agent", "images", swept)
	}
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: opts.Client.CoreV1().Events("")})
	return a, nil
}

// Run registers the Node, serves the agent's API and runs the Node's Pods
// until ctx ends; then it returns and leaves their containers running
// (but those with stdin or a terminal, which it stops), as a kubelet
// does: the next agent of the same StateDir and sandbox Owner adopts
// them. Only a Pod's deletion stops its container.
func (a *Agent) Run(ctx context.Context) error {
	log := a.opts.Log.WithValues("node", a.opts.NodeName)
	if err := a.register(ctx); err != nil {
		if ctx.Err() != nil {
			return nil // stopped before the node registered
		}
		return err
	}
	log.Info("Registered the node")

	l, err := net.Listen("tcp", net.JoinHostPort(a.opts.Address.String(), strconv.Itoa(a.opts.Port)))
	if err != nil {
		return fmt.Errorf("listening for the agent's API: %w", err)
	}
	srv := &http.Server{
		Handler:           a.apiHandler(),
		ReadHeaderTimeout: 10 * time.Second,
		TLSConfig: &tls.Config{
			MinVersion:   tls.VersionTLS12,
			Certificates: []tls.Certificate{a.opts.ServingCert},
			ClientCAs:    a.opts.ClientCAs,
			ClientAuth:   tls.RequireAndVerifyClientCert,
		},
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.ServeTLS(l, "", "") }()

	var loops sync.WaitGroup
	loops.Add(3)
	go func() { defer loops.Done(); a.renewLease(ctx) }()
	go func() { defer loops.Done(); a.postStatus(ctx) }()
	go func() { defer loops.Done(); a.collectImages(ctx) }()

	factory := informers.NewSharedInformerFactoryWithOptions(a.opts.Client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", a.opts.NodeName).String()
		}))
	pods := factory.Core().V1().Pods().Informer()
	reg, err := pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { a.sync(ctx, obj) },
		UpdateFunc: func(_, obj any) { a.sync(ctx, obj) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if p, ok := obj.(*corev1.Pod); ok {
				a.gone(p)
			}
		},
	})
	if err != nil {
		return err
	}
	factory.Start(ctx.Done())
	loops.Add(1)
	go func() {
		defer loops.Done()
		// Once every Pod bound here was seen, what no worker adopted is
		// not a Pod's any more.
		if !cache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
			return
		}
		bound := map[types.UID]bool{}
		for _, obj := range pods.GetStore().List() {
			if p, ok := obj.(*corev1.Pod); ok {
				bound[p.UID] = true
			}
		}
		a.sweepKept(func(uid types.UID) bool { return bound[uid] })
	}()

	select {
	case <-ctx.Done():
	case err = <-serveErr:
		err = fmt.Errorf("serving the agent's API: %w", err)
	}
	factory.Shutdown()
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	srv.Shutdown(shutdown)
	cancel()
	a.wg.Wait() // the workers end with ctx
	loops.Wait()
	a.events.Shutdown()
	log.Info("Stopped")
	return err
}

// sync hands a Pod to its worker, starting one for a Pod not seen before.
func (a *Agent) sync(ctx context.Context, obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if w, ok := a.workers[pod.UID]; ok {
		w.update(pod)
		return
	}
	if a.done[pod.UID] || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		// Finished before this agent started (or refused): nothing runs.
		// A deleted one is removed for good, as nothing of it is left.
		if pod.DeletionTimestamp != nil {
			go a.finalDelete(ctx, pod)
		}
		return
	}
	w := newPodWorker(a, pod)
	w.stopping = ctx.Done()
	w.kept = a.takeKept(pod.UID)
	if used, capacity := int64(len(a.workers)), a.opts.Capacity.Pods().Value(); used >= capacity {
		// What the kubelet's admission says of a Pod bound by name past
		// the node's pods (the scheduler would not have bound it).
		w.refusal = &refusal{reason: "OutOfpods",
			message: fmt.Sprintf("Node didn't have enough resource: pods, requested: 1, used: %d, capacity: %d", used, capacity)}
	}
	a.workers[pod.UID] = w
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		w.run(ctx)
		a.mu.Lock()
		delete(a.workers, pod.UID)
		if !w.isVanished() {
			a.done[pod.UID] = true
		}
		a.mu.Unlock()
		if w.isVanished() && ctx.Err() == nil {
			a.removeLogs(pod)
		}
	}()
}

// gone stops the worker of a Pod that no longer exists (deleted without
// a grace period, or after its worker removed it); without a worker, the
// Pod's logs go at once, else when the worker ends.
func (a *Agent) gone(pod *corev1.Pod) {
	a.mu.Lock()
	w := a.workers[pod.UID]
	delete(a.done, pod.UID)
	a.mu.Unlock()
	if w != nil {
		w.vanish()
		return
	}
	a.removeLogs(pod)
}

func (a *Agent) removeLogs(pod *corev1.Pod) {
	if err := a.logs.remove(pod); err != nil {
		a.opts.Log.Error(err, "Removing a gone pod's logs", "pod", klog.KObj(pod))
	}
}

// worker returns the worker of the Pod, nil when none runs it.
func (a *Agent) worker(namespace, name string) *podWorker {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, w := range a.workers {
		if p := w.pod(); p.Namespace == namespace && p.Name == name {
			return w
		}
	}
	return nil
}

// machineCapacity is this machine's CPUs and memory, the size of the file
// system of dir as ephemeral-storage (a kubelet's is its root file
// system's), and the kubelet's default of 110 pods.
func machineCapacity(dir string) corev1.ResourceList {
	list := corev1.ResourceList{
		corev1.ResourceCPU:  *resource.NewQuantity(int64(goruntime.NumCPU()), resource.DecimalSI),
		corev1.ResourcePods: *resource.NewQuantity(110, resource.DecimalSI),
	}
	if mem, err := memTotal(); err == nil {
		list[corev1.ResourceMemory] = *resource.NewQuantity(mem, resource.BinarySI)
	}
	// dir may not be made yet: its nearest parent that is tells.
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if u, err := loopfs.UsageOf(d); err == nil {
			list[corev1.ResourceEphemeralStorage] = *resource.NewQuantity(u.Size, resource.BinarySI)
			break
		}
		if d == filepath.Dir(d) {
			break
		}
	}
	return list
}
