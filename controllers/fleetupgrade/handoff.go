package fleetupgrade

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	fleetv1 "bex.co/bex/apis/fleet/v1alpha1"
	infrav1 "bex.co/bex/apis/infrastructure/v1alpha1"
	"bex.co/bex/internal/hetzner"
	"bex.co/bex/internal/store"
)

// HandoffHook is the Cluster API pre-drain deletion hook the controller
// puts on the control-plane Machines of a cluster it upgrades, when the
// hand-off applies to the cluster. Cluster API's machine controller neither
// drains nor deletes a Machine that carries it; the controller removes it
// once the Machine's server has left the cluster's API load balancer. Its
// value is the FleetUpgrade's name.
const HandoffHook = clusterv1.PreDrainDeleteHookAnnotationPrefix + "/bex-lb-handoff"

// LoadBalancerAnnotation on a Cluster names its Hetzner API load balancer
// (an ID or a name) and overrides what the HetznerCluster says; an empty
// value turns the hand-off off for the cluster.
const LoadBalancerAnnotation = "fleet.bex.co/hcloud-load-balancer"

// HetznerClusterKind is CAPH's infrastructure kind of a Cluster.
const HetznerClusterKind = "HetznerCluster"

// Defaults of the hand-off's Options.
const (
	DefaultHandoffRetryInterval    = 10 * time.Second
	DefaultHandoffMaxRetryInterval = 5 * time.Minute
	DefaultHandoffTimeout          = 2 * time.Minute
)

// LoadBalancer moves control-plane servers out of and into one cluster's
// API load balancer; *hetzner.LoadBalancerHandoff implements it. Both
// methods are idempotent and must honour ctx. RemoveServer returns nil only
// when the server gets no new connections from the load balancer any more
// (it left, was never a target, or no longer exists: ServerFound false).
// AddServer returns nil only once the load balancer's health checks call
// the server healthy. An error keeps the API's error.
type LoadBalancer interface {
	RemoveServer(ctx context.Context, ref hetzner.ServerRef) (hetzner.HandoffResult, error)
	AddServer(ctx context.Context, ref hetzner.ServerRef) (hetzner.HandoffResult, error)
}

var _ LoadBalancer = (*hetzner.LoadBalancerHandoff)(nil)

// LoadBalancerFunc returns the LoadBalancer of the cluster's API load
// balancer named loadBalancer (an ID or a name, as LoadBalancerAnnotation or
// the HetznerCluster gave it). It is called for every hand-off and may be
// called concurrently.
type LoadBalancerFunc func(ctx context.Context, cluster *clusterv1.Cluster, loadBalancer string) (LoadBalancer, error)

// HetznerLoadBalancers returns the LoadBalancerFunc of production: every
// cluster's load balancer is reached with the one hcloud client (a token of
// the Hetzner Cloud project the clusters live in) and opts, whose
// LoadBalancer is set per cluster.
func HetznerLoadBalancers(c *hcloud.Client, opts hetzner.HandoffOptions) LoadBalancerFunc {
	return func(_ context.Context, _ *clusterv1.Cluster, loadBalancer string) (LoadBalancer, error) {
		o := opts
		o.LoadBalancer = loadBalancer
		return hetzner.NewLoadBalancerHandoff(c, o)
	}
}

// loadBalancerOf returns the cluster's API load balancer: the Cluster's
// LoadBalancerAnnotation, else CAPH's HetznerCluster (its
// status.controlPlaneLoadBalancer.id, else spec.controlPlaneLoadBalancer.name).
// It returns "" when the hand-off does not apply: the annotation is empty,
// the Cluster's infrastructure is not a HetznerCluster, or the
// HetznerCluster has no load balancer.
func (r *Reconciler) loadBalancerOf(ctx context.Context, c *clusterv1.Cluster) (string, error) {
	if v, ok := c.Annotations[LoadBalancerAnnotation]; ok {
		return strings.TrimSpace(v), nil
	}
	ref := c.Spec.InfrastructureRef
	if ref.Kind != HetznerClusterKind || ref.Name == "" {
		return "", nil
	}
	mapping, err := r.Client.RESTMapper().RESTMapping(schema.GroupKind{Group: ref.APIGroup, Kind: ref.Kind})
	if err != nil {
		return "", fmt.Errorf("finding the API version of %s: %w", ref.Kind, err)
	}
	hc := &unstructured.Unstructured{}
	hc.SetGroupVersionKind(mapping.GroupVersionKind)
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: c.Namespace, Name: ref.Name}, hc); err != nil {
		return "", fmt.Errorf("reading %s %s/%s: %w", ref.Kind, c.Namespace, ref.Name, err)
	}
	return hetznerClusterLoadBalancer(hc)
}

// hetznerClusterLoadBalancer reads the API load balancer of a CAPH
// HetznerCluster: "" when spec.controlPlaneLoadBalancer.enabled is false,
// else the ID CAPH recorded in status, else the name in spec; an error when
// it has neither yet.
func hetznerClusterLoadBalancer(hc *unstructured.Unstructured) (string, error) {
	if enabled, found, _ := unstructured.NestedBool(hc.Object, "spec", "controlPlaneLoadBalancer", "enabled"); found && !enabled {
		return "", nil
	}
	if id, found, _ := unstructured.NestedInt64(hc.Object, "status", "controlPlaneLoadBalancer", "id"); found && id > 0 {
		return strconv.FormatInt(id, 10), nil
	}
	if name, _, _ := unstructured.NestedString(hc.Object, "spec", "controlPlaneLoadBalancer", "name"); name != "" {
		return name, nil
	}
	return "", fmt.Errorf("%s %s/%s has no load balancer yet (neither status.controlPlaneLoadBalancer.id nor spec.controlPlaneLoadBalancer.name)",
		hc.GetKind(), hc.GetNamespace(), hc.GetName())
}

// serverRef names the Hetzner server of a Machine: CAPH names the server
// after its HCloudMachine, and the node after the server.
func serverRef(m *clusterv1.Machine) hetzner.ServerRef {
	if ref := m.Spec.InfrastructureRef; ref.Kind == "HCloudMachine" && ref.Name != "" {
		return hetzner.ServerRef{Name: ref.Name}
	}
	if m.Status.NodeRef.Name != "" {
		return hetzner.ServerRef{Name: m.Status.NodeRef.Name}
	}
	return hetzner.ServerRef{Name: m.Spec.InfrastructureRef.Name}
}

func hooked(m *clusterv1.Machine) bool {
	_, ok := m.Annotations[HandoffHook]
	return ok
}

// handsOff reports whether a stopping apiserver of the cluster is out of
// its load balancer before it stops: by the hand-off, or by the
// infrastructure itself, as a LocalCluster's load balancer takes a deleted
// machine out and drains it (internal/localfleet). Such a cluster is
// wired, and preflight judges its shutdown flags, as one with the
// hand-off.
func (cs *clusterScope) handsOff() bool {
	return cs.loadBalancer != "" || (cs.cluster != nil && infrav1.IsLocalCluster(cs.cluster.Spec.InfrastructureRef))
}

// handoff runs the load-balancer hand-off of one observed cluster. It finds
// the cluster's load balancer; every control-plane Machine being deleted
// that carries HandoffHook has its server removed from the load balancer
// and, once that succeeded, loses the hook, so that Cluster API drains and
// deletes it; with ensure, every other Machine gets the hook, before
// KubeadmControlPlane may delete it. When the hand-off does not apply (no
// LoadBalancers, or no load balancer for the cluster) the hook is taken off
// every Machine. A failure of the Hetzner API is no error: it sets
// cs.handoffFailed and the Machine keeps its hook until a retry succeeds.
func (r *Reconciler) handoff(ctx context.Context, s *scope, cs *clusterScope, ensure bool) error {
	cs.loadBalancer = ""
	if cs.cluster == nil || cs.kcp == nil {
		return nil
	}
	if r.LoadBalancers == nil {
		return r.releaseHooks(ctx, cs, true)
	}
	// Without a load balancer found, the hooks stay (and are added):
	// nothing can be handed off, and no Machine goes before it is.
	if key := "find-lb/" + string(cs.cluster.UID); !r.retries.holding(key, s, cs) {
		lb, err := r.loadBalancerOf(ctx, cs.cluster)
		switch {
		case err != nil:
			r.handoffFailed(ctx, s, cs, key, nil, "FindLoadBalancer",
				fmt.Sprintf("finding the load balancer of cluster %s failed: %v. Set the annotation %s on the Cluster to the load balancer's ID or name (or to \"\" for no hand-off)",
					cs.key, err, LoadBalancerAnnotation))
		case lb == "":
			r.retries.forget(key)
			return r.releaseHooks(ctx, cs, true)
		default:
			r.retries.forget(key)
			cs.loadBalancer = lb
		}
	}
	for i := range cs.machines {
		m := &cs.machines[i]
		switch {
		case !m.DeletionTimestamp.IsZero():
			// One the gate holds is handed off once the gate passed
			// (releaseDeletions).
			if hooked(m) && cs.loadBalancer != "" && !gated(m) {
				if err := r.removeServer(ctx, s, cs, m); err != nil {
					return err
				}
			}
		case ensure && !hooked(m):
			if err := r.setHook(ctx, m, HandoffHook, s.fu.Name); err != nil {
				return err
			}
		}
	}
	return nil
}

// removeServer takes the server of a Machine being deleted out of the
// cluster's load balancer and then removes the Machine's hook.
func (r *Reconciler) removeServer(ctx context.Context, s *scope, cs *clusterScope, m *clusterv1.Machine) error {
	key := "remove/" + string(m.UID)
	if r.retries.holding(key, s, cs) {
		return nil
	}
	// Re-read: a hook removed a moment ago (the cache has not seen it
	// yet) is not handed off twice.
	cur := &clusterv1.Machine{}
	if err := r.reader().Get(ctx, client.ObjectKeyFromObject(m), cur); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("reading machine %s/%s: %w", m.Namespace, m.Name, err)
	}
	if !hooked(cur) {
		return nil
	}
	ref := serverRef(cur)
	res, err := r.callLoadBalancer(ctx, s, cs, func(ctx context.Context, lb LoadBalancer) (hetzner.HandoffResult, error) {
		return lb.RemoveServer(ctx, ref)
	})
	if err != nil {
		r.handoffFailed(ctx, s, cs, key, cur, "RemoveServer",
			fmt.Sprintf("removing server %s of Machine %s from load balancer %s failed: %v. Cluster API neither drains nor deletes the machine while it carries the annotation %s; the controller retries. Check the Hetzner API token's permissions and the load balancer, or remove that annotation to let the machine go without the hand-off",
				ref, cur.Name, cs.loadBalancer, err, HandoffHook))
		return r.recordHandoffFailure(ctx, s, cs, key, cur)
	}
	r.retries.forget(key)
	if err := r.setHook(ctx, cur, HandoffHook, ""); err != nil {
		return err
	}
	msg := fmt.Sprintf("server %s (%d) of machine %s left load balancer %s", res.ServerName, res.ServerID, cur.Name, cs.loadBalancer)
	switch {
	case !res.ServerFound:
		msg = fmt.Sprintf("server %s of machine %s does not exist: nothing to remove from load balancer %s", ref, cur.Name, cs.loadBalancer)
	case !res.Changed:
		msg = fmt.Sprintf("server %s (%d) of machine %s was not a target of load balancer %s", res.ServerName, res.ServerID, cur.Name, cs.loadBalancer)
	case res.Drained > 0:
		msg += fmt.Sprintf(" and drained for %s", res.Drained)
	}
	logf.FromContext(ctx).Info("Handed a server off the load balancer", "machine", klog.KObj(cur), "server", ref.Name, "loadBalancer", cs.loadBalancer, "changed", res.Changed)
	r.event(s, corev1.EventTypeNormal, "ServerLeftLoadBalancer", "RemoveServer", "Cluster %s: %s; Cluster API may delete the machine", cs.key, msg)
	return r.record(ctx, s, store.NewUpgradeStep{Cluster: cs.status.Name, Kind: StepKindLBHandoff, Machine: cur.Name,
		FromVersion: cs.status.FromVersion, ToVersion: s.target}, store.StepPassed, msg, nil)
}

// addServers puts the servers of the machines that joined into the
// cluster's load balancer and waits until it calls them healthy. It
// returns false while one is not in; the cluster then waits (paused) and
// the addition is retried with backoff.
func (r *Reconciler) addServers(ctx context.Context, s *scope, cs *clusterScope, fresh []string) (bool, error) {
	if cs.loadBalancer == "" {
		return cs.handoffFailed == "", nil
	}
	ok := true
	for i := range cs.machines {
		m := &cs.machines[i]
		if !contains(fresh, m.Name) {
			continue
		}
		key := "add/" + string(m.UID)
		if r.retries.holding(key, s, cs) {
			ok = false
			continue
		}
		ref := serverRef(m)
		res, err := r.callLoadBalancer(ctx, s, cs, func(ctx context.Context, lb LoadBalancer) (hetzner.HandoffResult, error) {
			return lb.AddServer(ctx, ref)
		})
		if err != nil {
			ok = false
			r.handoffFailed(ctx, s, cs, key, m, "AddServer",
				fmt.Sprintf("adding server %s of Machine %s to load balancer %s failed: %v. The Cluster stays paused, so no further machine is replaced, and the controller retries. Check the Hetzner API token's permissions, the load balancer and the server's apiserver",
					ref, m.Name, cs.loadBalancer, err))
			if err := r.recordHandoffFailure(ctx, s, cs, key, m); err != nil {
				return false, err
			}
			continue
		}
		r.retries.forget(key)
		if !res.Changed {
			continue
		}
		msg := fmt.Sprintf("server %s (%d) of machine %s joined load balancer %s and is healthy", res.ServerName, res.ServerID, m.Name, cs.loadBalancer)
		logf.FromContext(ctx).Info("Handed a server to the load balancer", "machine", klog.KObj(m), "server", ref.Name, "loadBalancer", cs.loadBalancer)
		r.event(s, corev1.EventTypeNormal, "ServerJoinedLoadBalancer", "AddServer", "Cluster %s: %s", cs.key, msg)
		if err := r.record(ctx, s, store.NewUpgradeStep{Cluster: cs.status.Name, Kind: StepKindLBHandoff, Machine: m.Name,
			FromVersion: cs.status.FromVersion, ToVersion: s.target}, store.StepPassed, msg, nil); err != nil {
			return false, err
		}
	}
	return ok, nil
}

// callLoadBalancer runs one hand-off call on the cluster's load balancer,
// bounded by HandoffTimeout.
func (r *Reconciler) callLoadBalancer(ctx context.Context, s *scope, cs *clusterScope,
	call func(context.Context, LoadBalancer) (hetzner.HandoffResult, error)) (hetzner.HandoffResult, error) {
	lb, err := r.LoadBalancers(ctx, cs.cluster, cs.loadBalancer)
	if err != nil {
		return hetzner.HandoffResult{}, fmt.Errorf("opening load balancer %s: %w", cs.loadBalancer, err)
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.HandoffTimeout)
	defer cancel()
	return call(ctx, lb)
}

// handoffFailed records a failed hand-off: the cluster holds with msg, the
// next try waits out the backoff, and a Warning Event says it.
func (r *Reconciler) handoffFailed(ctx context.Context, s *scope, cs *clusterScope, key string, m *clusterv1.Machine, action, msg string) {
	wait := r.retries.fail(key, s.now, s.opts.HandoffRetryInterval, s.opts.HandoffMaxRetryInterval, msg)
	cs.handoffFailed = msg + " (next try in " + wait.String() + ")"
	s.requeueAfter(wait)
	log := logf.FromContext(ctx).WithValues("cluster", cs.key, "retryIn", wait)
	if m != nil {
		log = log.WithValues("machine", klog.KObj(m))
	}
	log.Info("Load-balancer hand-off failed", "action", action, "message", msg)
	r.event(s, corev1.EventTypeWarning, fleetv1.FleetUpgradeLoadBalancerHandoffFailedReason, action, "Cluster %s: %s", cs.key, cs.handoffFailed)
}

// recordHandoffFailure records a failed lb-handoff step when the failure
// differs from the one recorded last for the same hand-off.
func (r *Reconciler) recordHandoffFailure(ctx context.Context, s *scope, cs *clusterScope, key string, m *clusterv1.Machine) error {
	msg, fresh := r.retries.unrecorded(key)
	if !fresh {
		return nil
	}
	return r.record(ctx, s, store.NewUpgradeStep{Cluster: cs.status.Name, Kind: StepKindLBHandoff, Machine: m.Name,
		FromVersion: cs.status.FromVersion, ToVersion: s.target}, store.StepFailed, msg, nil)
}

// releaseHooks takes HandoffHook off the cluster's Machines: the ones not
// being deleted, and with deleting also the ones being deleted (the
// hand-off does not apply to the cluster).
func (r *Reconciler) releaseHooks(ctx context.Context, cs *clusterScope, deleting bool) error {
	for i := range cs.machines {
		m := &cs.machines[i]
		if hooked(m) && (deleting || m.DeletionTimestamp.IsZero()) {
			if err := r.setHook(ctx, m, HandoffHook, ""); err != nil {
				return err
			}
		}
	}
	return nil
}

// releaseAllHooks takes the hooks this FleetUpgrade set (HandoffHook and
// GateHook) off every Machine, when the FleetUpgrade is deleted: the
// Machines go back to Cluster API.
func (r *Reconciler) releaseAllHooks(ctx context.Context, fu *fleetv1.FleetUpgrade) error {
	var machines clusterv1.MachineList
	if err := r.Client.List(ctx, &machines); err != nil {
		return fmt.Errorf("listing machines: %w", err)
	}
	for i := range machines.Items {
		m := &machines.Items[i]
		for _, hook := range []string{HandoffHook, GateHook} {
			if m.Annotations[hook] == fu.Name {
				if err := r.setHook(ctx, m, hook, ""); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// setHook puts the deletion hook key with value on the Machine, or takes
// it off when value is "". A Machine that is gone is fine.
func (r *Reconciler) setHook(ctx context.Context, m *clusterv1.Machine, key, value string) error {
	base := m.DeepCopy()
	if value == "" {
		delete(m.Annotations, key)
	} else {
		if m.Annotations == nil {
			m.Annotations = map[string]string{}
		}
		m.Annotations[key] = value
	}
	if err := r.Client.Patch(ctx, m, client.MergeFrom(base)); err != nil && !apierrors.IsNotFound(err) {
		if value == "" {
			return fmt.Errorf("removing the deletion hook %s from machine %s/%s: %w", key, m.Namespace, m.Name, err)
		}
		return fmt.Errorf("adding the deletion hook %s to machine %s/%s: %w", key, m.Namespace, m.Name, err)
	}
	return nil
}

func (r *Reconciler) reader() client.Reader {
	if r.Reader != nil {
		return r.Reader
	}
	return r.Client
}

// retries keeps the backoff of failed hand-offs, per Machine and call. It
// lives as long as the process: after a restart a hand-off is tried at
// once. The zero value is ready; it is safe for concurrent use.
type retries struct {
	mu sync.Mutex
	m  map[string]*retry
}

type retry struct {
	failures int
	next     time.Time
	// message is the last failure; recorded is the last one recorded.
	message, recorded string
}

// holding reports whether key waits out its backoff; the cluster then
// holds with the last failure.
func (b *retries) holding(key string, s *scope, cs *clusterScope) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	rt, ok := b.m[key]
	if !ok || !s.now.Before(rt.next) {
		return false
	}
	wait := rt.next.Sub(s.now)
	cs.handoffFailed = rt.message + " (next try in " + wait.Round(time.Millisecond).String() + ")"
	s.requeueAfter(wait)
	return true
}

// fail counts a failure of key and returns the wait before the next try:
// base, doubled with each further failure, at most max.
func (b *retries) fail(key string, now time.Time, base, max time.Duration, message string) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.m == nil {
		b.m = map[string]*retry{}
	}
	rt := b.m[key]
	if rt == nil {
		rt = &retry{}
		b.m[key] = rt
	}
	wait := base
	for i := 0; i < rt.failures && wait < max; i++ {
		wait *= 2
	}
	wait = min(wait, max)
	rt.failures++
	rt.next = now.Add(wait)
	rt.message = message
	return wait
}

// unrecorded returns key's last failure and whether it differs from the
// one recorded before, marking it recorded.
func (b *retries) unrecorded(key string) (string, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	rt, ok := b.m[key]
	if !ok || rt.message == rt.recorded {
		return "", false
	}
	rt.recorded = rt.message
	return rt.message, true
}

func (b *retries) forget(key string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.m, key)
}
