package fleetstate

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
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

var _ Source = (*CAPI)(nil)

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
		if _, err := c.cache.GetInformer(ctx, obj); err != nil {
			return fmt.Errorf("starting informer for %T: %w", obj, err)
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

// Clusters returns the Cluster API clusters, sorted by name; of two with one
// name in different namespaces, the one in the first namespace by name.
func (c *CAPI) Clusters(ctx context.Context) ([]Cluster, error) {
	c.mu.Lock()
	started := c.started
	c.mu.Unlock()
	if !started {
		return nil, errors.New("fleet caches not started")
	}
	noCopy := client.UnsafeDisableDeepCopy
	var clusters clusterv1.ClusterList
	if err := c.cache.List(ctx, &clusters, noCopy); err != nil {
		return nil, fmt.Errorf("listing clusters: %w", err)
	}
	var mds clusterv1.MachineDeploymentList
	if err := c.cache.List(ctx, &mds, noCopy); err != nil {
		return nil, fmt.Errorf("listing machinedeployments: %w", err)
	}
	var machines clusterv1.MachineList
	if err := c.cache.List(ctx, &machines, noCopy); err != nil {
		return nil, fmt.Errorf("listing machines: %w", err)
	}
	var kcps controlplanev1.KubeadmControlPlaneList
	if err := c.cache.List(ctx, &kcps, noCopy); err != nil {
		return nil, fmt.Errorf("listing kubeadmcontrolplanes: %w", err)
	}
	kcpByKey := make(map[string]*controlplanev1.KubeadmControlPlane, len(kcps.Items))
	for i := range kcps.Items {
		kcpByKey[kcps.Items[i].Namespace+"/"+kcps.Items[i].Name] = &kcps.Items[i]
	}
	var secrets corev1.SecretList
	if err := c.cache.List(ctx, &secrets, noCopy); err != nil {
		return nil, fmt.Errorf("listing secrets: %w", err)
	}
	secretByKey := make(map[string]*corev1.Secret, len(secrets.Items))
	for i := range secrets.Items {
		secretByKey[secrets.Items[i].Namespace+"/"+secrets.Items[i].Name] = &secrets.Items[i]
	}
	mdsOf := map[string][]*clusterv1.MachineDeployment{}
	for i := range mds.Items {
		md := &mds.Items[i]
		k := md.Namespace + "/" + md.Spec.ClusterName
		mdsOf[k] = append(mdsOf[k], md)
	}
	// machines by namespace/cluster/deployment
	machinesOf := map[string][]*clusterv1.Machine{}
	for i := range machines.Items {
		m := &machines.Items[i]
		md := m.Labels[clusterv1.MachineDeploymentNameLabel]
		if md == "" {
			continue
		}
		k := m.Namespace + "/" + m.Spec.ClusterName + "/" + md
		machinesOf[k] = append(machinesOf[k], m)
	}

	sort.Slice(clusters.Items, func(i, j int) bool {
		a, b := clusters.Items[i], clusters.Items[j]
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		return a.Namespace < b.Namespace
	})
	used := map[string]bool{}
	var out []Cluster
	for i := range clusters.Items {
		cl := &clusters.Items[i]
		if len(out) > 0 && out[len(out)-1].Name == cl.Name {
			continue
		}
		fc := Cluster{
			Name:      cl.Name,
			Namespace: cl.Namespace,
			Source:    SourceClusterAPI,
			Region:    cl.Labels[RegionLabel],
			Cordoned:  cl.Annotations[CordonedAnnotation] == "true",
			Healthy:   true,
		}
		if p := strings.TrimSpace(cl.Annotations[PlansAnnotation]); p != "" {
			for _, s := range strings.Split(p, ",") {
				fc.Plans = append(fc.Plans, strings.TrimSpace(s))
			}
			sort.Strings(fc.Plans)
		}
		observeControlPlane(cl, kcpByKey, &fc)
		if cond := meta.FindStatusCondition(cl.Status.Conditions, clusterv1.ClusterAvailableCondition); cond == nil || cond.Status != metav1.ConditionTrue {
			fc.Healthy = false
			fc.HealthMessage = "Cluster is not Available"
			if cond != nil && cond.Message != "" {
				fc.HealthMessage += ": " + cond.Message
			}
		}
		w, err := c.nodeWatchFor(ctx, cl, secretByKey, used)
		switch {
		case err != nil:
			fc.Healthy = false
			fc.HealthMessage = joinMsg(fc.HealthMessage, err.Error())
		case !w.synced():
			fc.Healthy = false
			fc.HealthMessage = joinMsg(fc.HealthMessage, "nodes not read yet")
		default:
			if err := w.recentError(c.opts.NodeErrorGrace); err != nil {
				fc.Healthy = false
				fc.HealthMessage = joinMsg(fc.HealthMessage, "reading nodes: "+err.Error())
			}
		}
		mdList := mdsOf[cl.Namespace+"/"+cl.Name]
		sort.Slice(mdList, func(i, j int) bool { return mdList[i].Name < mdList[j].Name })
		for _, md := range mdList {
			pool := Pool{Name: md.Name}
			for _, m := range machinesOf[cl.Namespace+"/"+cl.Name+"/"+md.Name] {
				if m.Status.NodeRef.Name == "" || w == nil {
					continue
				}
				node, ok := w.node(m.Status.NodeRef.Name)
				if !ok {
					continue
				}
				pool.Nodes++
				if !nodeReady(node) {
					continue
				}
				pool.ReadyNodes++
				pool.Allocatable.Add(Resources{
					CPU:    node.Status.Allocatable.Cpu().DeepCopy(),
					Memory: node.Status.Allocatable.Memory().DeepCopy(),
					Pods:   node.Status.Allocatable.Pods().Value(),
				})
			}
			fc.Pools = append(fc.Pools, pool)
		}
		out = append(out, fc)
	}
	c.stopUnused(used)
	return out, nil
}

// observeControlPlane fills in the control plane's versions and whether it
// is mid-upgrade, from the KubeadmControlPlane the Cluster references.
func observeControlPlane(cl *clusterv1.Cluster, kcps map[string]*controlplanev1.KubeadmControlPlane, fc *Cluster) {
	ref := cl.Spec.ControlPlaneRef
	if ref.Kind != "KubeadmControlPlane" || ref.Name == "" {
		return
	}
	kcp, ok := kcps[cl.Namespace+"/"+ref.Name]
	if !ok {
		fc.Healthy = false
		fc.HealthMessage = joinMsg(fc.HealthMessage, "KubeadmControlPlane "+ref.Name+" not found")
		return
	}
	var msgs []string
	for _, v := range kcp.Status.Versions {
		fc.ControlPlaneVersions = append(fc.ControlPlaneVersions, strings.TrimPrefix(v.Version, "v"))
		msgs = append(msgs, fmt.Sprintf("%s ×%d", v.Version, v.Replicas))
	}
	sort.Strings(fc.ControlPlaneVersions)
	want := strings.TrimPrefix(kcp.Spec.Version, "v")
	switch {
	case len(kcp.Status.Versions) > 1:
		fc.MidUpgrade = true
		fc.UpgradeMessage = "control plane runs " + strings.Join(msgs, ", ")
	case meta.IsStatusConditionTrue(kcp.Status.Conditions, controlplanev1.KubeadmControlPlaneRollingOutCondition):
		fc.MidUpgrade = true
		fc.UpgradeMessage = "control plane is rolling out"
	case len(fc.ControlPlaneVersions) == 1 && want != "" && want != fc.ControlPlaneVersions[0]:
		fc.MidUpgrade = true
		fc.UpgradeMessage = "control plane runs " + fc.ControlPlaneVersions[0] + ", upgrade to " + want + " requested"
	}
}

func joinMsg(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
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
	w, err := startNodeWatch(c.ctx, kubeconfig)
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
