package placed

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"bex.co/bex/internal/edge"
	"bex.co/bex/internal/runtime"
	"bex.co/bex/internal/runtime/kube"
)

// KubeconfigKey is the key of the kubeconfig in the Secret Cluster API
// writes for each cluster, <cluster>-kubeconfig.
const KubeconfigKey = "value"

// KubeOptions configure KubeClusters. Zero fields take the defaults in
// brackets.
type KubeOptions struct {
	// Client reads the management cluster's Cluster API Clusters and their
	// kubeconfig Secrets.
	Client client.Reader
	// Namespace, when set, is the only namespace Clusters are read in (a
	// process whose rights on Secrets are those of that namespace).
	Namespace string
	// Static are clusters that are not Cluster API's (the process
	// runtime's "local"); they win over a Cluster API cluster of the same
	// name, as in the scheduler's fleet.
	Static Static
	// Driver configures each cluster's kube driver.
	Driver kube.Options
	// RuntimeSecret, when set, is the Secret a cluster's kubeconfig is
	// read from instead of Cluster API's <cluster>-kubeconfig: its key
	// RuntimeKubeconfigKey(namespace, cluster), which the controller
	// manager writes (controllers/runtimecreds) with the rights of the
	// kube driver only. The Cluster is still looked for among Cluster
	// API's. The Secret is read once per Recheck for every cluster, and
	// again when it lacks the key of the cluster asked for.
	RuntimeSecret types.NamespacedName
	// Recheck is how long a cluster's driver is used before the Cluster
	// and its Secret are read again [10s].
	Recheck time.Duration
	Log     logr.Logger
}

// RuntimeKubeconfigKey is the key of the Cluster API cluster name of
// namespace in the runtime kubeconfigs Secret (KubeOptions.RuntimeSecret):
// NAMESPACE.NAME. A namespace's name holds no dot, so the key names one
// cluster; it is a valid Secret key while it is at most 253 characters.
func RuntimeKubeconfigKey(namespace, name string) string { return namespace + "." + name }

// ParseRuntimeKubeconfigKey returns the namespace and name of the cluster a
// key of the runtime kubeconfigs Secret names (RuntimeKubeconfigKey); ok
// is false for a key no cluster has.
func ParseRuntimeKubeconfigKey(key string) (namespace, name string, ok bool) {
	namespace, name, ok = strings.Cut(key, ".")
	return namespace, name, ok && namespace != "" && name != ""
}

// KubeClusters are the Cluster API clusters of a management cluster, each
// run by a kube driver made from its <cluster>-kubeconfig Secret with the
// cluster's EndpointSlices as its routing table (edge.EndpointSliceApps:
// the Pods' IPs, which the edge must reach), beside Static clusters. A
// cluster's driver is made when first asked for, made anew when its
// Secret changes, and dropped when its Cluster is gone. Close stops the
// clusters' watches.
type KubeClusters struct {
	opts   KubeOptions
	ctx    context.Context // the watches live as long
	cancel context.CancelFunc
	scheme *k8sruntime.Scheme

	mu    sync.Mutex
	slots map[string]*clusterSlot // by name
	// apps maps a cluster's name to its routing table; read without a
	// lock, since the edge reads it on every request and a slot's lock is
	// held while its cluster is connected.
	apps sync.Map
	// clusters maps a cluster's name to its connected *kubeCluster, read
	// without a lock as apps is (Watches, on every App's reconcile).
	clusters sync.Map
	// watches are the calls of Watch (watch.go).
	watches runtime.WatchList

	// runtimeMu guards the last read of opts.RuntimeSecret, and
	// runtimeRead is when that read began.
	runtimeMu     sync.Mutex
	runtimeSecret *corev1.Secret
	runtimeRead   time.Time
}

// clusterSlot holds one cluster's runtime under a lock of its own, so that
// a cluster being read or connected (up to a minute for one out of reach)
// holds up no other.
type clusterSlot struct {
	mu sync.Mutex
	c  *kubeCluster // nil until connected
}

type kubeCluster struct {
	secretUID     types.UID
	secretVersion string
	// kubeconfig is what the driver was made from: with a RuntimeSecret,
	// whose version changes with any cluster's key, a change of this
	// cluster's key is told by its content.
	kubeconfig []byte
	checked    time.Time
	driver     *kube.Driver
	apps       *edge.EndpointSliceApps
	// watchCtx lasts as long as the cluster's watches; stop ends it.
	watchCtx context.Context
	stop     context.CancelFunc

	watchMu sync.Mutex
	watched map[*runtime.WatchCall]bool // the calls of Watch run on driver
}

var _ Clusters = (*KubeClusters)(nil)

// NewKubeClusters returns KubeClusters whose watches live until ctx ends
// or Close.
func NewKubeClusters(ctx context.Context, opts KubeOptions) (*KubeClusters, error) {
	if opts.Client == nil {
		return nil, errors.New("kube clusters: Client is nil")
	}
	if opts.Recheck <= 0 {
		opts.Recheck = 10 * time.Second
	}
	scheme := k8sruntime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	return &KubeClusters{opts: opts, ctx: ctx, cancel: cancel, scheme: scheme, slots: map[string]*clusterSlot{}}, nil
}

// Close stops every cluster's watches.
func (k *KubeClusters) Close() {
	k.cancel()
	k.mu.Lock()
	defer k.mu.Unlock()
	for name, sl := range k.slots {
		sl.mu.Lock()
		if sl.c != nil {
			sl.c.stop()
			sl.c = nil
		}
		sl.mu.Unlock()
		k.apps.Delete(name)
		k.clusters.Delete(name)
	}
}

// slot returns the slot of the named cluster, making it when missing.
func (k *KubeClusters) slot(name string) *clusterSlot {
	k.mu.Lock()
	defer k.mu.Unlock()
	sl, ok := k.slots[name]
	if !ok {
		sl = &clusterSlot{}
		k.slots[name] = sl
	}
	return sl
}

// Driver implements Clusters.
func (k *KubeClusters) Driver(ctx context.Context, name string) (runtime.Driver, error) {
	if c, ok := k.opts.Static[name]; ok {
		return c.Driver, nil
	}
	sl := k.slot(name)
	sl.mu.Lock()
	defer sl.mu.Unlock()
	c := sl.c
	if c != nil && time.Since(c.checked) < k.opts.Recheck {
		return c.driver, nil
	}
	secret, kubeconfig, err := k.kubeconfig(ctx, name)
	if err != nil {
		if c != nil && errors.Is(err, ErrNoCluster) {
			c.stop()
			sl.c = nil
			k.apps.Delete(name)
			k.clusters.Delete(name)
			k.opts.Log.Info("Dropped the runtime of a deleted cluster", "cluster", name)
		}
		return nil, err
	}
	if c != nil && c.secretUID == secret.UID && (c.secretVersion == secret.ResourceVersion || k.opts.RuntimeSecret.Name != "" && bytes.Equal(c.kubeconfig, kubeconfig)) {
		c.checked = time.Now()
		return c.driver, nil
	}
	fresh, err := k.connect(ctx, secret, kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("connecting to cluster %s: %w", name, err)
	}
	if c != nil {
		c.stop()
	}
	sl.c = fresh
	k.apps.Store(name, fresh.apps)
	k.clusters.Store(name, fresh)
	k.watchNew(fresh)
	k.opts.Log.Info("Connected to a cluster's runtime", "cluster", name)
	return fresh.driver, nil
}

// kubeconfig returns the Secret that holds the kubeconfig of the Cluster
// API Cluster named name, in whichever namespace it is, and the
// kubeconfig: Cluster API's <cluster>-kubeconfig, or with a RuntimeSecret
// its key of that Secret.
func (k *KubeClusters) kubeconfig(ctx context.Context, name string) (*corev1.Secret, []byte, error) {
	var list clusterv1.ClusterList
	if err := k.opts.Client.List(ctx, &list, client.InNamespace(k.opts.Namespace)); err != nil {
		return nil, nil, fmt.Errorf("listing clusters: %w", err)
	}
	var cl *clusterv1.Cluster
	for i := range list.Items {
		if list.Items[i].Name == name {
			cl = &list.Items[i]
			break
		}
	}
	if cl == nil {
		return nil, nil, fmt.Errorf("%w %q", ErrNoCluster, name)
	}
	if k.opts.RuntimeSecret.Name != "" {
		asked := time.Now()
		secret, err := k.readRuntimeSecret(ctx, asked.Add(-k.opts.Recheck))
		if err != nil {
			return nil, nil, err
		}
		key := RuntimeKubeconfigKey(cl.Namespace, name)
		if len(secret.Data[key]) == 0 {
			// The key may have come since the last read: the App
			// controller asks again as soon as the Secret changes.
			if secret, err = k.readRuntimeSecret(ctx, asked); err != nil {
				return nil, nil, err
			}
		}
		if len(secret.Data[key]) == 0 {
			return nil, nil, fmt.Errorf("cluster %s has no runtime kubeconfig yet: Secret %s has no key %q (the controller manager writes it once the cluster's apiserver answers)", name, k.opts.RuntimeSecret, key)
		}
		return secret, secret.Data[key], nil
	}
	secret := &corev1.Secret{}
	key := client.ObjectKey{Namespace: cl.Namespace, Name: name + "-kubeconfig"}
	if err := k.opts.Client.Get(ctx, key, secret); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil, fmt.Errorf("cluster %s has no kubeconfig Secret %s yet", name, key)
		}
		return nil, nil, fmt.Errorf("reading %s: %w", key, err)
	}
	if len(secret.Data[KubeconfigKey]) == 0 {
		return nil, nil, fmt.Errorf("kubeconfig Secret %s has no key %q", key, KubeconfigKey)
	}
	return secret, secret.Data[KubeconfigKey], nil
}

// readRuntimeSecret returns opts.RuntimeSecret as read after since: the
// last read when it began after since, else a new one. With since Recheck
// ago, one read serves every cluster's check; a cluster without a key asks
// for a read begun after it asked, which callers waiting meanwhile share.
func (k *KubeClusters) readRuntimeSecret(ctx context.Context, since time.Time) (*corev1.Secret, error) {
	k.runtimeMu.Lock()
	defer k.runtimeMu.Unlock()
	if k.runtimeSecret != nil && k.runtimeRead.After(since) {
		return k.runtimeSecret, nil
	}
	began := time.Now()
	secret := &corev1.Secret{}
	if err := k.opts.Client.Get(ctx, k.opts.RuntimeSecret, secret); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("no runtime kubeconfigs Secret %s yet (the controller manager writes it)", k.opts.RuntimeSecret)
		}
		return nil, fmt.Errorf("reading %s: %w", k.opts.RuntimeSecret, err)
	}
	k.runtimeSecret, k.runtimeRead = secret, began
	return secret, nil
}

// connect makes the driver and the routing table of the cluster kubeconfig
// (of secret) opens; the table is synced when it returns.
func (k *KubeClusters) connect(ctx context.Context, secret *corev1.Secret, kubeconfig []byte) (*kubeCluster, error) {
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("reading the kubeconfig: %w", err)
	}
	cfg.UserAgent = "bex-runtime"
	watchCtx, stop := context.WithCancel(k.ctx)
	drv, apps, err := dial(ctx, watchCtx, cfg, k.opts.Driver, k.scheme, k.opts.Log.WithValues("secret", klog.KObj(secret)))
	if err != nil {
		stop()
		return nil, err
	}
	return &kubeCluster{
		secretUID: secret.UID, secretVersion: secret.ResourceVersion, kubeconfig: kubeconfig, checked: time.Now(),
		driver: drv, apps: apps, watchCtx: watchCtx, stop: stop,
	}, nil
}

// dial makes a kube driver for the cluster cfg reaches and its routing
// table, whose watch lasts as long as watchCtx; the table is synced when
// it returns, or ctx ends first (a minute at most).
func dial(ctx, watchCtx context.Context, cfg *rest.Config, opts kube.Options, scheme *k8sruntime.Scheme, log logr.Logger) (*kube.Driver, *edge.EndpointSliceApps, error) {
	drv, err := kube.New(cfg, opts)
	if err != nil {
		return nil, nil, err
	}
	c, err := cache.New(cfg, edge.SliceCacheOptions(scheme))
	if err != nil {
		return nil, nil, fmt.Errorf("making the EndpointSlice cache: %w", err)
	}
	go func() {
		if err := c.Start(watchCtx); err != nil {
			log.Error(err, "EndpointSlice cache stopped")
		}
	}()
	syncCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	apps, err := edge.WatchEndpointSlices(syncCtx, c)
	if err != nil {
		return nil, nil, err
	}
	return drv, apps, nil
}

// KubeCluster is the static cluster cfg reaches (a cluster install's
// --workload-kubeconfig): its kube driver, with opts, and its
// EndpointSlices as its routing table, watched until ctx ends. The table
// is synced when it returns.
func KubeCluster(ctx context.Context, cfg *rest.Config, opts kube.Options, log logr.Logger) (Cluster, *kube.Driver, error) {
	scheme := k8sruntime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return Cluster{}, nil, err
	}
	drv, apps, err := dial(ctx, ctx, cfg, opts, scheme, log)
	if err != nil {
		return Cluster{}, nil, err
	}
	return Cluster{Driver: drv, Apps: apps}, drv, nil
}

// Apps implements Clusters.
func (k *KubeClusters) Apps(name string) Apps {
	if c, ok := k.opts.Static[name]; ok {
		return c.Apps
	}
	if a, ok := k.apps.Load(name); ok {
		return a.(*edge.EndpointSliceApps)
	}
	return nil
}

// Connected returns the drivers of the Static clusters and of the Cluster
// API clusters connected now, by name; it connects none.
func (k *KubeClusters) Connected() map[string]runtime.Driver {
	out := k.opts.Static.Connected()
	k.clusters.Range(func(name, c any) bool {
		if _, static := out[name.(string)]; !static {
			out[name.(string)] = c.(*kubeCluster).driver
		}
		return true
	})
	return out
}
