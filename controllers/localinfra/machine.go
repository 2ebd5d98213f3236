package localinfra

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	infrav1 "bex.co/bex/apis/infrastructure/v1alpha1"
	"bex.co/bex/internal/localfleet"
	"bex.co/bex/internal/pki"
)

// MachineControllerName names the LocalMachine controller.
const MachineControllerName = "localmachine"

// CertificatesExpiryAnnotation is Cluster API's annotation, on a
// KubeadmConfig, of when the machine's kube-apiserver serving certificate
// expires.
const CertificatesExpiryAnnotation = "machine.cluster.x-k8s.io/certificates-expiry"

// kubeadmConfigGVK is the kind of the Machines' bootstrap configs.
var kubeadmConfigGVK = schema.GroupVersionKind{Group: "bootstrap.cluster.x-k8s.io", Version: "v1beta2", Kind: "KubeadmConfig"}

// MachineReconciler reconciles LocalMachines.
type MachineReconciler struct {
	// Client reads and writes the provider's and Cluster API's objects
	// (cached); it reads no Secret.
	Client client.Client
	// Reader reads the cluster's CA and the machines' bootstrap data
	// Secrets: the manager's API reader, uncached, so that the manager's
	// cache holds no Secret.
	Reader client.Reader
	Host   *localfleet.Host
	// MaxConcurrentReconciles bounds how many machines start or stop at
	// once; zero means 4.
	MaxConcurrentReconciles int
}

// SetupWithManager registers the reconciler. Besides LocalMachines it
// watches Machines, whose bootstrap data and deletion it acts on.
func (r *MachineReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Client == nil || r.Reader == nil || r.Host == nil {
		return errors.New("localmachine reconciler: Client, Reader and Host are required")
	}
	n := r.MaxConcurrentReconciles
	if n == 0 {
		n = 4
	}
	return ctrl.NewControllerManagedBy(mgr).Named(MachineControllerName).
		For(&infrav1.LocalMachine{}).
		Watches(&clusterv1.Machine{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			ref := o.(*clusterv1.Machine).Spec.InfrastructureRef
			if ref.APIGroup != infrav1.GroupVersion.Group || ref.Kind != infrav1.LocalMachineKind {
				return nil
			}
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: ref.Name}}}
		})).
		WithOptions(controller.Options{MaxConcurrentReconciles: n}).
		Complete(r)
}

// Reconcile implements reconcile.Reconciler.
func (r *MachineReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	lm := &infrav1.LocalMachine{}
	if err := r.Client.Get(ctx, req.NamespacedName, lm); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	machine, err := r.ownerMachine(ctx, lm)
	if err != nil {
		return ctrl.Result{}, err
	}
	var cluster *clusterv1.Cluster
	if machine != nil {
		cluster = &clusterv1.Cluster{}
		if err := r.Client.Get(ctx, types.NamespacedName{Namespace: lm.Namespace, Name: machine.Spec.ClusterName}, cluster); err != nil {
			if !apierrors.IsNotFound(err) {
				return ctrl.Result{}, err
			}
			cluster = nil
		}
	}
	if cluster != nil && isPaused(cluster, lm.ObjectMeta) {
		return ctrl.Result{}, nil
	}
	if !lm.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.delete(ctx, lm, cluster)
	}
	if controllerutil.AddFinalizer(lm, infrav1.LocalMachineFinalizer) {
		if err := r.Client.Update(ctx, lm); err != nil {
			return ctrl.Result{}, err
		}
	}
	if machine == nil || cluster == nil {
		return ctrl.Result{}, r.setReady(ctx, lm, metav1.ConditionFalse, infrav1.WaitingForClusterReason, "no Machine of a Cluster owns this LocalMachine yet")
	}
	if cluster.Status.Initialization.InfrastructureProvisioned == nil || !*cluster.Status.Initialization.InfrastructureProvisioned {
		return ctrl.Result{}, r.setReady(ctx, lm, metav1.ConditionFalse, infrav1.WaitingForClusterReason, "the Cluster's infrastructure is not provisioned yet")
	}
	if machine.Spec.Bootstrap.DataSecretName == nil {
		return ctrl.Result{}, r.setReady(ctx, lm, metav1.ConditionFalse, infrav1.WaitingForBootstrapDataReason, "the Machine has no bootstrap data yet")
	}
	if machine.Spec.Version == "" {
		return ctrl.Result{}, r.setReady(ctx, lm, metav1.ConditionFalse, infrav1.FailedReason, "the Machine has no spec.version: a local machine runs the kube-apiserver of its Machine's version")
	}
	c, err := r.cluster(ctx, cluster)
	if err != nil {
		return ctrl.Result{}, err
	}
	if lm.Spec.ProviderID == "" {
		patch := client.MergeFrom(lm.DeepCopy())
		lm.Spec.ProviderID = infrav1.ProviderIDPrefix + lm.Namespace + "/" + lm.Name
		if err := r.Client.Patch(ctx, lm, patch); err != nil {
			return ctrl.Result{}, err
		}
	}
	if _, cp := machine.Labels[clusterv1.MachineControlPlaneLabel]; !cp {
		return r.reconcileWorker(ctx, lm, machine, cluster, c)
	}
	m := c.Machine(lm.Name)
	if m == nil {
		data, err := r.bootstrapData(ctx, lm.Namespace, *machine.Spec.Bootstrap.DataSecretName)
		if err != nil {
			return ctrl.Result{}, err
		}
		r.setReady(ctx, lm, metav1.ConditionFalse, infrav1.StartingReason, "starting kube-apiserver "+machine.Spec.Version)
		if m, err = c.StartMachine(ctx, localfleet.MachineSpec{Name: lm.Name, Version: machine.Spec.Version,
			ProviderID: lm.Spec.ProviderID, BootstrapData: data}); err != nil {
			r.setReady(ctx, lm, metav1.ConditionFalse, infrav1.FailedReason, err.Error())
			return ctrl.Result{}, err
		}
	}
	if err := r.annotateCertificatesExpiry(ctx, machine, m.APIServerCertificateExpiry()); err != nil {
		return ctrl.Result{}, err
	}
	patch := client.MergeFrom(lm.DeepCopy())
	lm.Status.Initialization.Provisioned = ptr.To(true)
	lm.Status.Addresses = []clusterv1.MachineAddress{
		{Type: clusterv1.MachineInternalIP, Address: m.IP().String()},
		{Type: clusterv1.MachineHostName, Address: m.Name()},
	}
	lm.Status.Version = "v" + m.Version()
	lm.Status.Restarts = int32(m.Restarts())
	switch {
	case m.Lost():
		setCondition(&lm.Status.Conditions, lm.Generation, metav1.ConditionFalse, infrav1.FailedReason, "the machine was lost")
	case m.Running():
		setCondition(&lm.Status.Conditions, lm.Generation, metav1.ConditionTrue, infrav1.ReadyReason, "kube-apiserver v"+m.Version()+" on "+m.Addr())
	default:
		setCondition(&lm.Status.Conditions, lm.Generation, metav1.ConditionFalse, infrav1.StartingReason, "kube-apiserver exited; restarting")
	}
	if err := r.Client.Status().Patch(ctx, lm, patch); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: resync}, nil
}

// reconcileWorker starts a worker machine (a Machine without the
// control-plane label, such as a MachineDeployment's): its node agent,
// bex-node, with credentials from the cluster's CA. Cluster API's Machine
// controller matches its Node by the provider ID and sets the Machine's
// nodeRef.
func (r *MachineReconciler) reconcileWorker(ctx context.Context, lm *infrav1.LocalMachine, machine *clusterv1.Machine, cluster *clusterv1.Cluster, c *localfleet.Cluster) (ctrl.Result, error) {
	w := c.Worker(lm.Name)
	if w == nil {
		data, err := r.bootstrapData(ctx, lm.Namespace, *machine.Spec.Bootstrap.DataSecretName)
		if err != nil {
			return ctrl.Result{}, err
		}
		ca, err := r.clusterCA(ctx, cluster)
		if err != nil {
			return ctrl.Result{}, err
		}
		r.setReady(ctx, lm, metav1.ConditionFalse, infrav1.StartingReason, "starting bex-node "+machine.Spec.Version)
		if w, err = c.StartWorker(ctx, localfleet.WorkerSpec{Name: lm.Name, Version: machine.Spec.Version,
			ProviderID: lm.Spec.ProviderID, BootstrapData: data, CA: ca}); err != nil {
			r.setReady(ctx, lm, metav1.ConditionFalse, infrav1.FailedReason, err.Error())
			return ctrl.Result{}, err
		}
	}
	patch := client.MergeFrom(lm.DeepCopy())
	lm.Status.Initialization.Provisioned = ptr.To(true)
	lm.Status.Addresses = []clusterv1.MachineAddress{
		{Type: clusterv1.MachineInternalIP, Address: w.IP().String()},
		{Type: clusterv1.MachineHostName, Address: w.Name()},
	}
	lm.Status.Version = "v" + w.Version()
	lm.Status.Restarts = int32(w.Restarts())
	if w.Running() {
		setCondition(&lm.Status.Conditions, lm.Generation, metav1.ConditionTrue, infrav1.ReadyReason, "bex-node v"+w.Version()+" on "+w.IP().String())
	} else {
		setCondition(&lm.Status.Conditions, lm.Generation, metav1.ConditionFalse, infrav1.StartingReason, "bex-node exited; restarting")
	}
	if err := r.Client.Status().Patch(ctx, lm, patch); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: resync}, nil
}

// clusterCA reads the cluster's CA, the <cluster>-ca Secret Cluster API
// generated.
func (r *MachineReconciler) clusterCA(ctx context.Context, cluster *clusterv1.Cluster) (*pki.KeyPair, error) {
	s := &corev1.Secret{}
	name := cluster.Name + "-ca"
	if err := r.Reader.Get(ctx, types.NamespacedName{Namespace: cluster.Namespace, Name: name}, s); err != nil {
		return nil, fmt.Errorf("reading the cluster CA Secret %s: %w", name, err)
	}
	ca, err := pki.ParseKeyPair(s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey])
	if err != nil {
		return nil, fmt.Errorf("the cluster CA Secret %s: %w", name, err)
	}
	return ca, nil
}

// ownerMachine returns the Machine that owns the LocalMachine, nil when
// none does yet.
func (r *MachineReconciler) ownerMachine(ctx context.Context, lm *infrav1.LocalMachine) (*clusterv1.Machine, error) {
	for _, ref := range lm.OwnerReferences {
		if ref.Kind != "Machine" || !isClusterAPI(ref.APIVersion) {
			continue
		}
		m := &clusterv1.Machine{}
		err := r.Client.Get(ctx, types.NamespacedName{Namespace: lm.Namespace, Name: ref.Name}, m)
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return m, err
	}
	return nil, nil
}

// cluster returns the running processes of the Machine's cluster,
// starting them when the Host does not run them (after a restart).
func (r *MachineReconciler) cluster(ctx context.Context, cluster *clusterv1.Cluster) (*localfleet.Cluster, error) {
	ref := cluster.Spec.InfrastructureRef
	if !infrav1.IsLocalCluster(ref) {
		return nil, fmt.Errorf("cluster %s's infrastructure is a %s, not a LocalCluster", cluster.Name, ref.Kind)
	}
	if c := r.Host.Cluster(cluster.Namespace, ref.Name); c != nil {
		return c, nil
	}
	lc := &infrav1.LocalCluster{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: cluster.Namespace, Name: ref.Name}, lc); err != nil {
		return nil, err
	}
	spec, err := hostSpec(lc)
	if err != nil {
		return nil, err
	}
	return r.Host.EnsureCluster(ctx, spec)
}

// bootstrapData reads the Machine's bootstrap data Secret.
func (r *MachineReconciler) bootstrapData(ctx context.Context, ns, name string) ([]byte, error) {
	s := &corev1.Secret{}
	if err := r.Reader.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, s); err != nil {
		return nil, fmt.Errorf("reading bootstrap data Secret %s: %w", name, err)
	}
	if f := string(s.Data["format"]); f != "" && f != "cloud-config" {
		return nil, fmt.Errorf("bootstrap data Secret %s is %s: a local machine reads cloud-config only", name, f)
	}
	return s.Data["value"], nil
}

// annotateCertificatesExpiry sets CertificatesExpiryAnnotation on the
// Machine's KubeadmConfig, when it is one and lacks it.
func (r *MachineReconciler) annotateCertificatesExpiry(ctx context.Context, machine *clusterv1.Machine, expiry time.Time) error {
	ref := machine.Spec.Bootstrap.ConfigRef
	if ref.Kind != kubeadmConfigGVK.Kind || ref.APIGroup != kubeadmConfigGVK.Group {
		return nil
	}
	kc := &metav1.PartialObjectMetadata{}
	kc.SetGroupVersionKind(kubeadmConfigGVK)
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: machine.Namespace, Name: ref.Name}, kc); err != nil {
		return client.IgnoreNotFound(err)
	}
	want := expiry.UTC().Format(time.RFC3339)
	if kc.Annotations[CertificatesExpiryAnnotation] == want {
		return nil
	}
	patch := client.MergeFrom(kc.DeepCopy())
	if kc.Annotations == nil {
		kc.Annotations = map[string]string{}
	}
	kc.Annotations[CertificatesExpiryAnnotation] = want
	return r.Client.Patch(ctx, kc, patch)
}

// delete stops the machine (drain, mirror Pods, kube-apiserver) and removes
// its files, then the finalizer.
func (r *MachineReconciler) delete(ctx context.Context, lm *infrav1.LocalMachine, cluster *clusterv1.Cluster) error {
	if !controllerutil.ContainsFinalizer(lm, infrav1.LocalMachineFinalizer) {
		return nil
	}
	setCondition(&lm.Status.Conditions, lm.Generation, metav1.ConditionFalse, infrav1.DeletingReason, "stopping the machine's processes")
	if cluster != nil {
		c, err := r.cluster(ctx, cluster)
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		if c != nil {
			if err := c.DeleteMachine(ctx, lm.Name); err != nil {
				return err
			}
		}
	}
	controllerutil.RemoveFinalizer(lm, infrav1.LocalMachineFinalizer)
	logf.FromContext(ctx).Info("LocalMachine deleted", "localMachine", lm.Name)
	return client.IgnoreNotFound(r.Client.Update(ctx, lm))
}

func (r *MachineReconciler) setReady(ctx context.Context, lm *infrav1.LocalMachine, status metav1.ConditionStatus, reason, msg string) error {
	patch := client.MergeFrom(lm.DeepCopy())
	setCondition(&lm.Status.Conditions, lm.Generation, status, reason, msg)
	return r.Client.Status().Patch(ctx, lm, patch)
}
