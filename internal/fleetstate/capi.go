package fleetstate

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"bex.co/bex/apis/scheduling/v1alpha1"
)

// Labels and annotations read on Cluster API Clusters; the API documents
// them in scheduling.bex.co/v1alpha1.
const (
	RegionLabel        = v1alpha1.RegionLabel
	PlansAnnotation    = v1alpha1.PlansAnnotation
	CordonedAnnotation = v1alpha1.CordonedAnnotation
	// KubeconfigKey is the key of the kubeconfig in the Secret Cluster API
	// writes for each cluster.
	KubeconfigKey = "value"
)

// CAPIOptions configures a CAPI source.
type CAPIOptions struct {
	// Namespace limits the clusters read to one namespace; "" reads all.
	Namespace string
	// SyncTimeout bounds Start's wait for the caches; zero means a minute.
	SyncTimeout time.Duration
	// NodeErrorGrace is how long after a failed read of a workload
	// cluster's nodes the cluster counts as unhealthy; zero means 30 s.
	NodeErrorGrace time.Duration
}

// CAPI is the Source of the clusters Cluster API manages. Create it with
// NewCAPI and Start it once; Clusters fails until Start returned.
type CAPI struct {
	opts  CAPIOptions
	cache crcache.Cache

	// changes counts the events of every informer the source reads (the
	// Cluster API objects, the kubeconfig Secrets and every workload
	// cluster's Nodes): Version.
	changes atomic.Uint64
	// signal tells of each change: Notify.
	signal Signal

	mu      sync.Mutex
	ctx     context.Context // of Start; node watches live as long
	started bool
	watches map[string]*nodeWatch // by hash of the kubeconfig
	hashes  map[types.UID]secretHash
}

// secretHash is the hash of a kubeconfig Secret's kubeconfig at a version.
type secretHash struct {
	resourceVersion string
	hash            string
}

var (
	_ Source    = (*CAPI)(nil)
	_ Versioned = (*CAPI)(nil)
	_ Notifier  = (*CAPI)(nil)
)

// NewScheme returns a scheme with the kinds a CAPI source reads.
func NewScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, clusterv1.AddToScheme, controlplanev1.AddToScheme} {
		if err := add(s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// NewCAPI returns a source that reads Cluster API objects through cfg, a
// client of the management cluster. It needs get, list and watch on
// clusters, machines and machinedeployments (cluster.x-k8s.io),
// kubeadmcontrolplanes (controlplane.cluster.x-k8s.io) and secrets.
func NewCAPI(cfg *rest.Config, opts CAPIOptions) (*CAPI, error) {
	if cfg == nil {
		return nil, errors.New("fleetstate: nil rest config")
	}
	if opts.SyncTimeout == 0 {
		opts.SyncTimeout = time.Minute
	}
	if opts.NodeErrorGrace == 0 {
		opts.NodeErrorGrace = 30 * time.Second
	}
	scheme, err := NewScheme()
	if err != nil {
		return nil, fmt.Errorf("building scheme: %w", err)
	}
	// Only the kubeconfig Secrets, which Cluster API labels with the
	// cluster's name.
	hasCluster, err := labels.NewRequirement(clusterv1.ClusterNameLabel, selection.Exists, nil)
	if err != nil {
		return nil, err
	}
	co := crcache.Options{
		Scheme: scheme,
		ByObject: map[client.Object]crcache.ByObject{
			&corev1.Secret{}: {Label: labels.NewSelector().Add(*hasCluster)},
		},
	}
	if opts.Namespace != "" {
		co.DefaultNamespaces = map[string]crcache.Config{opts.Namespace: {}}
	}
	c, err := crcache.New(cfg, co)
	if err != nil {
		return nil, fmt.Errorf("creating cache: %w", err)
	}
	return &CAPI{opts: opts, cache: c, watches: map[string]*nodeWatch{}, hashes: map[types.UID]secretHash{}}, nil
}

// Start starts the informers and returns once they synced, or with an error
// when they did not within the sync timeout (typically: the Cluster API CRDs
// are not installed). Everything it starts stops when ctx ends.
func (c *CAPI) Start(ctx context.Context) error {
	for _, obj := range []client.Object{&clusterv1.Cluster{}, &clusterv1.Machine{}, &clusterv1.MachineDeployment{}, &controlplanev1.KubeadmControlPlane{}, &corev1.Secret{}} {
		inf, err := c.cache.GetInformer(ctx, obj)
		if err != nil {
			return fmt.Errorf("starting informer for %T: %w", obj, err)
		}
		if _, err := inf.AddEventHandler(c.changeHandler()); err != nil {
			return fmt.Errorf("watching %T: %w", obj, err)
		}
	}
	go func() {
		if err := c.cache.Start(ctx); err != nil {
			klog.FromContext(ctx).Error(err, "Fleet cache stopped")
		}
	}()
	syncCtx, cancel := context.WithTimeout(ctx, c.opts.SyncTimeout)
	defer cancel()
	if !c.cache.WaitForCacheSync(syncCtx) {
		return fmt.Errorf("waiting for Cluster API caches: not synced within %s (are the Cluster API v1beta2 CRDs installed?)", c.opts.SyncTimeout)
	}
	c.mu.Lock()
	c.ctx, c.started = ctx, true
	c.mu.Unlock()
	return nil
}

// changeHandler counts every event in changes and tells Notify's callers.
func (c *CAPI) changeHandler() toolscache.ResourceEventHandler {
	changed := func() {
		c.changes.Add(1)
		c.signal.Broadcast()
	}
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { changed() },
		UpdateFunc: func(any, any) { changed() },
		DeleteFunc: func(any) { changed() },
	}
}

// Version counts the changes to what Clusters reads; ok once Start
// returned.
func (c *CAPI) Version() (uint64, bool) {
	c.mu.Lock()
	started := c.started
	c.mu.Unlock()
	return c.changes.Load(), started
}

// Notify calls changed after each change to what Clusters reads (the
// events Version counts), until ctx ends.
func (c *CAPI) Notify(ctx context.Context, changed func()) { c.signal.Notify(ctx, changed) }

// Clusters returns the Cluster API clusters, sorted by name; of two with one
// name in different namespaces, the one in the first namespace by name.
func (c *CAPI) Clusters(ctx context.Context) ([]Cluster, error) {
	c.mu.Lock()
	started := c.started
	c.mu.Unlock()
	if !started {
		return nil, errors.New("fleet caches not started")
	}
	idx, err := c.index(ctx)
	if err != nil {
		return nil, err
	}
	used := map[string]bool{}
	var out []Cluster
	for _, cl := range idx.clusters {
		if len(out) > 0 && out[len(out)-1].Name == cl.Name {
			continue
		}
		out = append(out, c.clusterState(ctx, idx, cl, used))
	}
	c.stopUnused(used)
	return out, nil
}

// nodeWatchFor returns the node watch of the cluster's workload cluster,
// starting one when its kubeconfig is new. It records the watch's key in used.
func (c *CAPI) nodeWatchFor(ctx context.Context, cl *clusterv1.Cluster, secrets map[string]*corev1.Secret, used map[string]bool) (*nodeWatch, error) {
	name := cl.Name + "-kubeconfig"
	secret, ok := secrets[cl.Namespace+"/"+name]
	if !ok {
		return nil, fmt.Errorf("kubeconfig Secret %s/%s not found (or not labelled %s)", cl.Namespace, name, clusterv1.ClusterNameLabel)
	}
	kubeconfig := secret.Data[KubeconfigKey]
	if len(kubeconfig) == 0 {
		return nil, fmt.Errorf("kubeconfig Secret %s/%s has no key %q", cl.Namespace, name, KubeconfigKey)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	// Hash a Secret's kubeconfig once per version of the Secret.
	key := c.hashes[secret.UID]
	if key.resourceVersion != secret.ResourceVersion {
		sum := sha256.Sum256(kubeconfig)
		key = secretHash{resourceVersion: secret.ResourceVersion, hash: hex.EncodeToString(sum[:])}
		c.hashes[secret.UID] = key
	}
	used[key.hash] = true
	if w, ok := c.watches[key.hash]; ok {
		return w, nil
	}
	w, err := startNodeWatch(c.ctx, kubeconfig, c.opts.NodeErrorGrace, c.changeHandler())
	if err != nil {
		return nil, fmt.Errorf("kubeconfig Secret %s/%s: %w", cl.Namespace, name, err)
	}
	klog.FromContext(ctx).V(2).Info("Watching nodes", "cluster", klog.KObj(cl))
	c.watches[key.hash] = w
	return w, nil
}

// stopUnused stops the node watches of kubeconfigs no cluster uses any more.
func (c *CAPI) stopUnused(used map[string]bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, w := range c.watches {
		if !used[k] {
			w.stop()
			delete(c.watches, k)
		}
	}
	for uid, h := range c.hashes {
		if !used[h.hash] {
			delete(c.hashes, uid)
		}
	}
}
