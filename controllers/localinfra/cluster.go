package localinfra

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	infrav1 "bex.co/bex/apis/infrastructure/v1alpha1"
	"bex.co/bex/internal/localfleet"
)

// ClusterControllerName names the LocalCluster controller.
const ClusterControllerName = "localcluster"

// resync is how often a provisioned object is looked at again, to restart
// what died and report the load balancer's backends.
const resync = 15 * time.Second

// ClusterReconciler reconciles LocalClusters.
type ClusterReconciler struct {
	// Client reads and writes the provider's and Cluster API's objects
	// (cached); it reads no Secret.
	Client client.Client
	// Reader reads the etcd Secrets the reconciler writes: the manager's
	// API reader, uncached, so that the manager's cache holds no Secret.
	Reader client.Reader
	Host   *localfleet.Host
}

// SetupWithManager registers the reconciler.
func (r *ClusterReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Client == nil || r.Reader == nil || r.Host == nil {
		return errors.New("localcluster reconciler: Client, Reader and Host are required")
	}
	return ctrl.NewControllerManagedBy(mgr).Named(ClusterControllerName).
		For(&infrav1.LocalCluster{}).
		Complete(r)
}

// Reconcile implements reconcile.Reconciler.
func (r *ClusterReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	lc := &infrav1.LocalCluster{}
	if err := r.Client.Get(ctx, req.NamespacedName, lc); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	cluster, err := ownerCluster(ctx, r.Client, lc.ObjectMeta)
	if err != nil {
		return ctrl.Result{}, err
	}
	if !lc.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.delete(ctx, lc, cluster)
	}
	if controllerutil.AddFinalizer(lc, infrav1.LocalClusterFinalizer) {
		if err := r.Client.Update(ctx, lc); err != nil {
			return ctrl.Result{}, err
		}
	}
	if cluster == nil {
		return ctrl.Result{}, r.setReady(ctx, lc, metav1.ConditionFalse, infrav1.WaitingForClusterReason, "no Cluster owns this LocalCluster yet")
	}
	if isPaused(cluster, lc.ObjectMeta) {
		return ctrl.Result{}, nil
	}
	spec, err := hostSpec(lc)
	if err != nil {
		return ctrl.Result{}, r.setReady(ctx, lc, metav1.ConditionFalse, infrav1.FailedReason, err.Error())
	}
	c, err := r.Host.EnsureCluster(ctx, spec)
	if err != nil {
		r.setReady(ctx, lc, metav1.ConditionFalse, infrav1.FailedReason, err.Error())
		return ctrl.Result{}, err
	}
	if err := r.ensureEtcdSecrets(ctx, lc, cluster.Name, c); err != nil {
		return ctrl.Result{}, err
	}
	if !lc.Spec.ControlPlaneEndpoint.IsValid() {
		patch := client.MergeFrom(lc.DeepCopy())
		lc.Spec.ControlPlaneEndpoint = clusterv1.APIEndpoint{Host: c.EndpointHost(), Port: int32(c.Port())}
		if err := r.Client.Patch(ctx, lc, patch); err != nil {
			return ctrl.Result{}, err
		}
	}
	patch := client.MergeFrom(lc.DeepCopy())
	lc.Status.Initialization.Provisioned = ptr.To(true)
	lc.Status.EtcdEndpoint = c.Etcd().URL()
	lc.Status.Backends = c.Backends()
	setCondition(&lc.Status.Conditions, lc.Generation, metav1.ConditionTrue, infrav1.ReadyReason, "etcd at "+c.Etcd().URL()+", load balancer at "+c.Endpoint())
	if err := r.Client.Status().Patch(ctx, lc, patch); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: resync}, nil
}

// hostSpec returns what the Host runs of lc.
func hostSpec(lc *infrav1.LocalCluster) (localfleet.ClusterSpec, error) {
	block, err := localfleet.ParseBlock(lc.Spec.AddressBlock)
	if err != nil {
		return localfleet.ClusterSpec{}, err
	}
	return localfleet.ClusterSpec{Namespace: lc.Namespace, Name: lc.Name, Block: block, Plane: lc.Spec.Plane}, nil
}

// etcd Secrets Cluster API reads for a cluster with external etcd, named
// after the Cluster.
func etcdCASecret(cluster string) string     { return cluster + "-etcd" }
func etcdClientSecret(cluster string) string { return cluster + "-apiserver-etcd-client" }

// ensureEtcdSecrets writes the Secrets KubeadmControlPlane and the kubeadm
// bootstrap provider read for external etcd: the CA without its key (a key
// would make them take it for a CA to sign with) and the client pair the
// kube-apiservers present.
func (r *ClusterReconciler) ensureEtcdSecrets(ctx context.Context, lc *infrav1.LocalCluster, cluster string, c *localfleet.Cluster) error {
	certPEM, keyPEM, err := c.Etcd().ClientPEM()
	if err != nil {
		return err
	}
	for name, data := range map[string]map[string][]byte{
		etcdCASecret(cluster):     {"tls.crt": c.Etcd().CACertPEM()},
		etcdClientSecret(cluster): {"tls.crt": certPEM, "tls.key": keyPEM},
	} {
		if err := r.writeSecret(ctx, lc.Namespace, name, cluster, data); err != nil {
			return fmt.Errorf("writing Secret %s: %w", name, err)
		}
	}
	return nil
}

// writeSecret creates the Secret ns/name of cluster with data, or updates
// it when its label or data differ; it is read with Reader.
func (r *ClusterReconciler) writeSecret(ctx context.Context, ns, name, cluster string, data map[string][]byte) error {
	s := &corev1.Secret{}
	err := r.Reader.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, s)
	if apierrors.IsNotFound(err) {
		s = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{clusterv1.ClusterNameLabel: cluster}}, Data: data}
		return r.Client.Create(ctx, s)
	}
	if err != nil {
		return err
	}
	if s.Labels[clusterv1.ClusterNameLabel] == cluster && maps.EqualFunc(s.Data, data, bytes.Equal) {
		return nil
	}
	if s.Labels == nil {
		s.Labels = map[string]string{}
	}
	s.Labels[clusterv1.ClusterNameLabel] = cluster
	s.Data = data
	return r.Client.Update(ctx, s)
}

// delete stops the cluster's processes, removes its files and the etcd
// Secrets, then the finalizer.
func (r *ClusterReconciler) delete(ctx context.Context, lc *infrav1.LocalCluster, cluster *clusterv1.Cluster) error {
	if !controllerutil.ContainsFinalizer(lc, infrav1.LocalClusterFinalizer) {
		return nil
	}
	if err := r.Host.DeleteCluster(lc.Namespace, lc.Name); err != nil {
		return err
	}
	name := lc.Labels[clusterv1.ClusterNameLabel]
	if cluster != nil {
		name = cluster.Name
	}
	if name != "" {
		for _, s := range []string{etcdCASecret(name), etcdClientSecret(name)} {
			err := r.Client.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: s, Namespace: lc.Namespace}})
			if err != nil && !apierrors.IsNotFound(err) {
				return err
			}
		}
	}
	controllerutil.RemoveFinalizer(lc, infrav1.LocalClusterFinalizer)
	logf.FromContext(ctx).Info("LocalCluster deleted", "localCluster", lc.Name)
	return client.IgnoreNotFound(r.Client.Update(ctx, lc))
}

func (r *ClusterReconciler) setReady(ctx context.Context, lc *infrav1.LocalCluster, status metav1.ConditionStatus, reason, msg string) error {
	patch := client.MergeFrom(lc.DeepCopy())
	setCondition(&lc.Status.Conditions, lc.Generation, status, reason, msg)
	return r.Client.Status().Patch(ctx, lc, patch)
}

// ownerCluster returns the Cluster that owns obj, nil when none does yet.
func ownerCluster(ctx context.Context, c client.Client, obj metav1.ObjectMeta) (*clusterv1.Cluster, error) {
	for _, ref := range obj.OwnerReferences {
		if ref.Kind != "Cluster" || !isClusterAPI(ref.APIVersion) {
			continue
		}
		cluster := &clusterv1.Cluster{}
		err := c.Get(ctx, types.NamespacedName{Namespace: obj.Namespace, Name: ref.Name}, cluster)
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return cluster, err
	}
	return nil, nil
}

// isClusterAPI reports whether an owner reference's apiVersion is Cluster
// API's core group (any version).
func isClusterAPI(apiVersion string) bool {
	gv, err := schema.ParseGroupVersion(apiVersion)
	return err == nil && gv.Group == clusterv1.GroupVersion.Group
}

// isPaused reports whether Cluster API's pause applies: the Cluster's
// spec.paused or the object's cluster.x-k8s.io/paused annotation.
func isPaused(cluster *clusterv1.Cluster, obj metav1.ObjectMeta) bool {
	if cluster != nil && cluster.Spec.Paused != nil && *cluster.Spec.Paused {
		return true
	}
	_, ok := obj.Annotations[clusterv1.PausedAnnotation]
	return ok
}

func setCondition(conds *[]metav1.Condition, gen int64, status metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(conds, metav1.Condition{Type: infrav1.ReadyCondition, Status: status, Reason: reason, Message: msg, ObservedGeneration: gen})
}
