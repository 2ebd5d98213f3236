package runtimecreds

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
	"bex.co/bex/internal/runtime/kube"
	"bex.co/bex/internal/runtime/placed"
)

const (
	// ControllerName names the controller in logs, metrics and events.
	ControllerName = "runtimecreds"

	// DefaultLifetime is how long a minted token is valid; it is renewed
	// once a third of it is left.
	DefaultLifetime = 24 * time.Hour
	// Resync is the longest a cluster waits before it is looked at again:
	// its objects applied again, its tenant namespaces prepared, its key
	// written again if the Secret lost it. A Cluster without its
	// kubeconfig Secret waits for the Secret's watch, or Resync at most.
	Resync = 10 * time.Minute
)

// Reconciler keeps each Cluster's runtime credentials (see the package
// documentation). One worker: every cluster writes the same Secret.
type Reconciler struct {
	// Client reads Clusters and Apps (cached); Reader reads the Secrets
	// (uncached: the reconciler watches the metadata of Cluster API's
	// Secrets only, kubeconfigSource).
	Client client.Client
	Reader client.Reader
	// Events records a cluster's failures on its Cluster; nil records
	// none.
	Events events.EventRecorder
	// Secret is the Secret the kubeconfigs are written into, in the
	// platform's own namespace. Required.
	Secret types.NamespacedName
	// FleetNamespace, when set, is the only namespace whose Clusters get
	// credentials.
	FleetNamespace string
	// Tenants is how the tenant namespaces of the workload clusters are
	// kept (the kube driver's Network, as the platform's processes have
	// it); TenantRole, TenantSubjects and PreparedNamespaces are the
	// Reconciler's own.
	Tenants kube.Options
	// Lifetime of the tokens [DefaultLifetime]; the apiserver refuses
	// less than 10 minutes and may give less than asked for.
	Lifetime time.Duration
	// Now is the clock renewals are decided by [time.Now].
	Now func() time.Time

	mu sync.Mutex
	// drivers are the admin kube drivers that prepare each cluster's
	// tenant namespaces, by cluster, kept while its kubeconfig is the
	// same so that PrepareNamespace's PrepareInterval holds.
	drivers map[types.NamespacedName]*adminDriver
}

type adminDriver struct {
	kubeconfig [sha256.Size]byte
	driver     *kube.Driver
}

// SetupWithManager registers the reconciler: Clusters (of FleetNamespace),
// each Cluster again when its kubeconfig Secret comes or changes
// (kubeconfigSource), and a Cluster again when an App is placed on it
// (status.cluster set or changed: its tenant namespace is prepared there).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Client == nil || r.Reader == nil || r.Secret.Name == "" || r.Secret.Namespace == "" {
		return errors.New("runtime credentials reconciler: Client, Reader and Secret are required")
	}
	if r.Lifetime <= 0 {
		r.Lifetime = DefaultLifetime
	}
	if r.Now == nil {
		r.Now = time.Now
	}
	inFleet := predicate.NewPredicateFuncs(func(o client.Object) bool {
		return r.FleetNamespace == "" || o.GetNamespace() == r.FleetNamespace
	})
	kubeconfigs, err := r.kubeconfigSource(mgr)
	if err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		For(&clusterv1.Cluster{}, builder.WithPredicates(inFleet)).
		WatchesRawSource(kubeconfigs).
		Watches(&platformv1alpha1.App{}, handler.EnqueueRequestsFromMapFunc(r.placedOn),
			builder.WithPredicates(predicate.Funcs{
				CreateFunc: func(e event.CreateEvent) bool { return clusterOf(e.Object) != "" },
				UpdateFunc: func(e event.UpdateEvent) bool {
					c := clusterOf(e.ObjectNew)
					return c != "" && c != clusterOf(e.ObjectOld)
				},
				DeleteFunc: func(event.DeleteEvent) bool { return false },
			})).
		Complete(r)
}

// clusterOf is the name of the cluster an App is placed on, "" for none.
func clusterOf(o client.Object) string {
	if a, ok := o.(*platformv1alpha1.App); ok {
		return a.Status.Cluster
	}
	return ""
}

// placedOn returns the Clusters named as the cluster o is placed on: one,
// unless several fleet namespaces hold a Cluster of that name.
func (r *Reconciler) placedOn(ctx context.Context, o client.Object) []reconcile.Request {
	name := clusterOf(o)
	if name == "" {
		return nil
	}
	var list clusterv1.ClusterList
	if err := r.Client.List(ctx, &list, client.InNamespace(r.FleetNamespace)); err != nil {
		logf.FromContext(ctx).Error(err, "Listing clusters")
		return nil
	}
	var reqs []reconcile.Request
	for _, c := range list.Items {
		if c.Name == name {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&c)})
		}
	}
	return reqs
}

// Reconcile keeps one Cluster's identity, tenant namespaces and key, or
// drops its key once it is gone.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := logf.FromContext(ctx)
	cl := &clusterv1.Cluster{}
	err := r.Client.Get(ctx, req.NamespacedName, cl)
	if err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, err
	}
	if apierrors.IsNotFound(err) || !cl.DeletionTimestamp.IsZero() {
		r.forget(req.NamespacedName)
		return ctrl.Result{}, r.writeKey(ctx, req.NamespacedName, nil)
	}
	log = log.WithValues("cluster", klog.KObj(cl))
	key := placed.RuntimeKubeconfigKey(cl.Namespace, cl.Name)
	if msgs := validation.IsConfigMapKey(key); len(msgs) > 0 {
		r.warn(cl, "KeyRefused", "Runtime kubeconfig of %s/%s refused: its key %q is no Secret key (%v); give the cluster a shorter name", cl.Namespace, cl.Name, key, msgs)
		return ctrl.Result{}, nil
	}

	admin, adminKubeconfig, err := r.adminConfig(ctx, cl)
	if apierrors.IsNotFound(err) {
		// The Secret's watch brings the Cluster back once it comes.
		log.V(1).Info("Waiting for the cluster's kubeconfig Secret")
		return ctrl.Result{RequeueAfter: Resync}, nil
	}
	if err != nil {
		r.warn(cl, "KubeconfigInvalid", "Reading the admin kubeconfig of %s/%s: %v", cl.Namespace, cl.Name, err)
		return ctrl.Result{}, err
	}
	w, err := newWorkload(admin)
	if err != nil {
		return ctrl.Result{}, err
	}
	saUID, err := w.ensureIdentity(ctx)
	if err != nil {
		r.warn(cl, "WorkloadUnreachable", "Keeping the runtime identity on %s/%s: %v", cl.Namespace, cl.Name, err)
		return ctrl.Result{}, fmt.Errorf("keeping the runtime identity on cluster %s: %w", cl.Name, err)
	}
	now := r.Now()
	current, err := r.currentKey(ctx, key)
	if err != nil {
		return ctrl.Result{}, err
	}
	renewAt, ok := r.renewAt(current, admin, saUID)
	if !ok || !now.Before(renewAt) {
		token, expires, err := w.mintToken(ctx, r.Lifetime)
		if err != nil {
			r.warn(cl, "TokenRequestFailed", "Minting the runtime token of %s/%s: %v", cl.Namespace, cl.Name, err)
			return ctrl.Result{}, fmt.Errorf("minting the runtime token of cluster %s: %w", cl.Name, err)
		}
		kubeconfig, err := runtimeKubeconfig(cl.Name, admin, token)
		if err != nil {
			return ctrl.Result{}, err
		}
		if err := r.writeKey(ctx, req.NamespacedName, kubeconfig); err != nil {
			var tooBig *tooBigError
			if errors.As(err, &tooBig) {
				r.warn(cl, "SecretFull", "%v", err)
				return ctrl.Result{RequeueAfter: Resync}, nil
			}
			return ctrl.Result{}, err
		}
		log.Info("Wrote a runtime kubeconfig", "secret", r.Secret, "key", key, "expires", expires)
		renewAt = expires.Add(-r.Lifetime / 3)
	} else if err := r.writeKey(ctx, req.NamespacedName, current); err != nil {
		// Only the sweep of gone clusters' keys can change anything here.
		return ctrl.Result{}, err
	}
	// After the key: a tenant namespace that cannot be prepared (one
	// being deleted) holds up no token.
	if err := r.prepareTenants(ctx, req.NamespacedName, admin, adminKubeconfig); err != nil {
		r.warn(cl, "TenantNamespacesFailed", "Preparing the tenant namespaces of %s/%s: %v", cl.Namespace, cl.Name, err)
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: min(max(renewAt.Sub(now), time.Second), Resync)}, nil
}

// adminConfig reads the Cluster's <cluster>-kubeconfig; a missing Secret
// is NotFound.
func (r *Reconciler) adminConfig(ctx context.Context, cl *clusterv1.Cluster) (*rest.Config, []byte, error) {
	secret := &corev1.Secret{}
	if err := r.Reader.Get(ctx, client.ObjectKey{Namespace: cl.Namespace, Name: cl.Name + "-kubeconfig"}, secret); err != nil {
		return nil, nil, err
	}
	data := secret.Data[placed.KubeconfigKey]
	cfg, err := clientcmd.RESTConfigFromKubeConfig(data)
	if err != nil {
		return nil, nil, fmt.Errorf("key %q: %w", placed.KubeconfigKey, err)
	}
	// The runtime kubeconfig carries the CA itself, also when the admin
	// kubeconfig names a file.
	if err := rest.LoadTLSFiles(cfg); err != nil {
		return nil, nil, fmt.Errorf("key %q: %w", placed.KubeconfigKey, err)
	}
	cfg.UserAgent, cfg.Timeout = "bex-runtimecreds", 30*time.Second
	return cfg, data, nil
}

// prepareTenants prepares, on the cluster admin reaches, the namespace of
// every tenant with an App placed there (status.cluster): a tenant whose
// apps run elsewhere has no namespace on it, until an App of it is placed
// there (a move, or its first placement).
func (r *Reconciler) prepareTenants(ctx context.Context, cluster types.NamespacedName, admin *rest.Config, kubeconfig []byte) error {
	var apps platformv1alpha1.AppList
	if err := r.Client.List(ctx, &apps); err != nil {
		return fmt.Errorf("listing apps: %w", err)
	}
	apps.Items = slices.DeleteFunc(apps.Items, func(a platformv1alpha1.App) bool { return a.Status.Cluster != cluster.Name })
	if len(apps.Items) == 0 {
		return nil
	}
	drv, err := r.driver(cluster, admin, kubeconfig)
	if err != nil {
		return err
	}
	done := map[string]bool{}
	var errs []error
	for _, a := range apps.Items {
		if done[a.Namespace] {
			continue
		}
		done[a.Namespace] = true
		if err := drv.PrepareNamespace(ctx, a.Namespace); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (r *Reconciler) driver(cluster types.NamespacedName, admin *rest.Config, kubeconfig []byte) (*kube.Driver, error) {
	sum := sha256.Sum256(kubeconfig)
	r.mu.Lock()
	defer r.mu.Unlock()
	if d, ok := r.drivers[cluster]; ok && d.kubeconfig == sum {
		return d.driver, nil
	}
	opts := r.Tenants
	opts.PreparedNamespaces = false
	opts.TenantRole = TenantRoleName
	opts.TenantSubjects = runtimeSubjects()
	drv, err := kube.New(admin, opts)
	if err != nil {
		return nil, err
	}
	if r.drivers == nil {
		r.drivers = map[types.NamespacedName]*adminDriver{}
	}
	r.drivers[cluster] = &adminDriver{kubeconfig: sum, driver: drv}
	return drv, nil
}

func (r *Reconciler) forget(cluster types.NamespacedName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.drivers, cluster)
}

// renewAt returns when the token of kubeconfig (the key written last) is
// to be renewed: once a third of Lifetime is left. ok is false when it is
// to be minted now: no kubeconfig, another server or CA than admin's, a
// token of another ServiceAccount (deleted and made again) or unreadable.
func (r *Reconciler) renewAt(kubeconfig []byte, admin *rest.Config, saUID types.UID) (time.Time, bool) {
	if len(kubeconfig) == 0 {
		return time.Time{}, false
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil || cfg.Host != admin.Host || !bytes.Equal(cfg.CAData, admin.CAData) || cfg.ServerName != admin.ServerName {
		return time.Time{}, false
	}
	claims, err := readClaims(cfg.BearerToken)
	if err != nil || claims.uid != saUID {
		return time.Time{}, false
	}
	return claims.expires.Add(-r.Lifetime / 3), true
}

func (r *Reconciler) warn(cl *clusterv1.Cluster, reason, format string, args ...any) {
	if r.Events != nil {
		r.Events.Eventf(cl, nil, corev1.EventTypeWarning, reason, "RuntimeCredentials", format, args...)
	}
}
