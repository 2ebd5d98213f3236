package workerhook

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

const (
	// ControllerName names the controller in logs and metrics.
	ControllerName = "workerhook"

	// Hook is the pre-drain deletion hook put on worker Machines; its
	// value names the platform.
	Hook = clusterv1.PreDrainDeleteHookAnnotationPrefix + "/bex"
	// TerminateHook is the pre-terminate deletion hook put beside Hook.
	// Cluster API skips a Machine's pre-drain hooks when its Cluster is
	// being deleted (v1.14's Machine controller drains nothing then, and
	// goes on to delete the infrastructure), so Hook alone would not hold
	// a worker through its cluster's deletion; pre-terminate hooks hold it
	// in every case, before its infrastructure machine is deleted.
	TerminateHook = clusterv1.PreTerminateDeleteHookAnnotationPrefix + "/bex"

	// DefaultMaxHold bounds how long a worker of a cluster being deleted
	// waits for its apps to move.
	DefaultMaxHold = 10 * time.Minute
	// DefaultSettle is how long a worker is kept once its cluster serves no
	// app, for the requests the edge sent there before the switch.
	DefaultSettle = 5 * time.Second

	// recheck is how often a held worker looks at its cluster's apps again.
	recheck = 5 * time.Second
)

// Apps tells which apps a cluster serves; *store.Store is one.
type Apps interface {
	// AppsServedBy returns the apps ("tenant/app") cluster serves.
	AppsServedBy(ctx context.Context, cluster string) ([]string, error)
}

// Reconciler puts Hook and TerminateHook on worker Machines and takes them off once they may
// go (see the package documentation).
type Reconciler struct {
	Client client.Client
	Apps   Apps
	// Events records why a worker was held or let go, on the Machine; nil
	// records none.
	Events events.EventRecorder
	// Workloads reaches a cluster's apiserver, to roll the platform's
	// Pods off a worker of a cluster that stays (SecretWorkloads); nil
	// lets such a worker go at once.
	Workloads Workloads
	// MaxHold is DefaultMaxHold when zero; Settle is DefaultSettle when
	// zero.
	MaxHold, Settle time.Duration

	mu sync.Mutex
	// holds is what was seen of each held Machine's cluster.
	holds map[types.NamespacedName]*hold
}

// hold is what was last seen of a held Machine's cluster.
type hold struct {
	// apps is the apps it served; emptySince is when it was first seen
	// serving none.
	apps       string
	emptySince time.Time
}

// SetupWithManager registers the reconciler; it watches Machines, and
// Clusters for their deletion.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Client == nil || r.Apps == nil {
		return errors.New("worker hook reconciler: Client and Apps are required")
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		For(&clusterv1.Machine{}).
		Watches(&clusterv1.Cluster{}, handler.EnqueueRequestsFromMapFunc(r.workersOf)).
		Complete(r)
}

// workersOf returns the worker Machines of a Cluster.
func (r *Reconciler) workersOf(ctx context.Context, obj client.Object) []reconcile.Request {
	var machines clusterv1.MachineList
	if err := r.Client.List(ctx, &machines, client.InNamespace(obj.GetNamespace()),
		client.MatchingLabels{clusterv1.ClusterNameLabel: obj.GetName()}); err != nil {
		logf.FromContext(ctx).Error(err, "Listing the cluster's machines", "cluster", obj.GetName())
		return nil
	}
	var reqs []reconcile.Request
	for _, m := range machines.Items {
		if !isControlPlane(&m) {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&m)})
		}
	}
	return reqs
}

func isControlPlane(m *clusterv1.Machine) bool {
	_, ok := m.Labels[clusterv1.MachineControlPlaneLabel]
	return ok
}

// Reconcile puts Hook on a worker Machine, or decides whether a deleted one
// may go.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	m := &clusterv1.Machine{}
	if err := r.Client.Get(ctx, req.NamespacedName, m); err != nil {
		r.forget(req.NamespacedName)
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if isControlPlane(m) {
		return ctrl.Result{}, nil
	}
	_, drainHeld := m.Annotations[Hook]
	_, terminateHeld := m.Annotations[TerminateHook]
	held := drainHeld || terminateHeld
	if m.DeletionTimestamp.IsZero() {
		if drainHeld && terminateHeld {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, r.setHook(ctx, m, true)
	}
	if !held {
		r.forget(req.NamespacedName)
		return ctrl.Result{}, nil
	}

	cluster := &clusterv1.Cluster{}
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: m.Spec.ClusterName}, cluster)
	if err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, fmt.Errorf("reading cluster %s/%s of machine %s: %w", m.Namespace, m.Spec.ClusterName, m.Name, err)
	}
	if err == nil && cluster.DeletionTimestamp.IsZero() {
		// A scale-down or a rollout: the cluster keeps its apps, on its
		// other workers.
		return r.moveOff(ctx, m, cluster)
	}

	apps, err := r.Apps.AppsServedBy(ctx, m.Spec.ClusterName)
	if err != nil {
		return ctrl.Result{}, err
	}
	now := time.Now()
	h := r.hold(req.NamespacedName)
	if len(apps) > 0 {
		h.emptySince = time.Time{}
		if waited := now.Sub(m.DeletionTimestamp.Time); waited >= r.maxHold() {
			return ctrl.Result{}, r.release(ctx, m, corev1.EventTypeWarning, "AppsNotMoved",
				fmt.Sprintf("Letting the worker go after %s: cluster %s still serves %s", waited.Round(time.Second), m.Spec.ClusterName, strings.Join(apps, ", ")))
		}
		if list := strings.Join(apps, ", "); list != h.apps {
			h.apps = list
			logf.FromContext(ctx).Info("Holding the worker until its apps move", "cluster", m.Spec.ClusterName, "apps", apps)
			if r.Events != nil {
				r.Events.Eventf(m, nil, corev1.EventTypeNormal, "WaitingForApps", "Hold",
					"Cluster %s is being deleted: the worker waits until %s moved", m.Spec.ClusterName, list)
			}
		}
		return ctrl.Result{RequeueAfter: recheck}, nil
	}
	if h.emptySince.IsZero() {
		h.emptySince = now
	}
	if wait := r.settle() - now.Sub(h.emptySince); wait > 0 {
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	r.forget(req.NamespacedName)
	return ctrl.Result{}, r.release(ctx, m, corev1.EventTypeNormal, "AppsMoved",
		fmt.Sprintf("Cluster %s serves no app any more: the worker may be drained", m.Spec.ClusterName))
}

func (r *Reconciler) release(ctx context.Context, m *clusterv1.Machine, eventType, reason, note string) error {
	if err := r.setHook(ctx, m, false); err != nil {
		return err
	}
	logf.FromContext(ctx).Info("Letting the worker go", "reason", reason, "message", note)
	if r.Events != nil {
		r.Events.Eventf(m, nil, eventType, reason, "Release", note)
	}
	return nil
}

// setHook puts Hook and TerminateHook on m or takes them off.
func (r *Reconciler) setHook(ctx context.Context, m *clusterv1.Machine, on bool) error {
	base := m.DeepCopy()
	for _, h := range []string{Hook, TerminateHook} {
		if on {
			if m.Annotations == nil {
				m.Annotations = map[string]string{}
			}
			m.Annotations[h] = "bex"
		} else {
			delete(m.Annotations, h)
		}
	}
	if err := r.Client.Patch(ctx, m, client.MergeFrom(base)); err != nil && !apierrors.IsNotFound(err) {
		if on {
			return fmt.Errorf("adding the deletion hooks %s and %s to machine %s/%s: %w", Hook, TerminateHook, m.Namespace, m.Name, err)
		}
		return fmt.Errorf("removing the deletion hooks %s and %s from machine %s/%s: %w", Hook, TerminateHook, m.Namespace, m.Name, err)
	}
	return nil
}

// hold returns what was seen of a held Machine's cluster; the caller
// holds no lock, and one Machine is reconciled at a time.
func (r *Reconciler) hold(key types.NamespacedName) *hold {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.holds == nil {
		r.holds = map[types.NamespacedName]*hold{}
	}
	h, ok := r.holds[key]
	if !ok {
		h = &hold{}
		r.holds[key] = h
	}
	return h
}

func (r *Reconciler) forget(key types.NamespacedName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.holds, key)
}

func (r *Reconciler) maxHold() time.Duration {
	if r.MaxHold > 0 {
		return r.MaxHold
	}
	return DefaultMaxHold
}

func (r *Reconciler) settle() time.Duration {
	if r.Settle > 0 {
		return r.Settle
	}
	return DefaultSettle
}
