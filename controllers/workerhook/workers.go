package workerhook

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"bex.co/bex/internal/fleetstate"
)

// MovedOffAnnotation, on the pod template of a Deployment of the
// platform's, names the worker its Pods were rolled off before Cluster API
// drained it: setting it rolls the Deployment as `kubectl rollout restart`
// does, a new Pod ready on another worker before the old one stops.
const MovedOffAnnotation = "bex.co/moved-off-node"

// managedBy selects the platform's Pods on a workload cluster (the kube
// runtime driver's app.kubernetes.io/managed-by label).
var managedBy = client.MatchingLabels{"app.kubernetes.io/managed-by": "bex"}

// Workloads returns a client of a Cluster API cluster's apiserver.
type Workloads func(ctx context.Context, cluster *clusterv1.Cluster) (client.Client, error)

// SecretWorkloads reaches a cluster with Cluster API's
// <cluster>-kubeconfig Secret, read through c.
func SecretWorkloads(c client.Reader) Workloads {
	return func(ctx context.Context, cl *clusterv1.Cluster) (client.Client, error) {
		secret := &corev1.Secret{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: cl.Namespace, Name: cl.Name + "-kubeconfig"}, secret); err != nil {
			return nil, fmt.Errorf("reading the kubeconfig of cluster %s/%s: %w", cl.Namespace, cl.Name, err)
		}
		cfg, err := clientcmd.RESTConfigFromKubeConfig(secret.Data[fleetstate.KubeconfigKey])
		if err != nil {
			return nil, fmt.Errorf("the kubeconfig of cluster %s/%s: %w", cl.Namespace, cl.Name, err)
		}
		cfg.UserAgent, cfg.Timeout = "bex-workerhook", 30*time.Second
		return client.New(cfg, client.Options{})
	}
}

// moveOff rolls the platform's Deployments off a worker of a Cluster that
// stays, and lets the worker go once none of their Pods runs on it.
func (r *Reconciler) moveOff(ctx context.Context, m *clusterv1.Machine, cluster *clusterv1.Cluster) (ctrl.Result, error) {
	node := m.Status.NodeRef.Name
	if node == "" || r.Workloads == nil {
		return ctrl.Result{}, r.release(ctx, m, corev1.EventTypeNormal, "WorkerReleased", "The worker runs no Node the platform can read")
	}
	if waited := time.Since(m.DeletionTimestamp.Time); waited >= r.maxHold() {
		return ctrl.Result{}, r.release(ctx, m, corev1.EventTypeWarning, "AppsNotMoved",
			fmt.Sprintf("Letting the worker go after %s: its Pods were not rolled onto other workers", waited.Round(time.Second)))
	}
	wc, err := r.Workloads(ctx, cluster)
	if err != nil {
		return ctrl.Result{}, err
	}
	n := &corev1.Node{}
	if err := wc.Get(ctx, client.ObjectKey{Name: node}, n); apierrors.IsNotFound(err) {
		return ctrl.Result{}, r.release(ctx, m, corev1.EventTypeNormal, "WorkerReleased", fmt.Sprintf("Node %s is gone", node))
	} else if err != nil {
		return ctrl.Result{}, fmt.Errorf("reading node %s of cluster %s: %w", node, cluster.Name, err)
	}
	others, err := otherWorkers(ctx, wc, node)
	if err != nil {
		return ctrl.Result{}, err
	}
	if others == 0 {
		return ctrl.Result{}, r.release(ctx, m, corev1.EventTypeNormal, "WorkerReleased",
			fmt.Sprintf("No other worker of cluster %s can take the Pods of %s", cluster.Name, node))
	}
	if !n.Spec.Unschedulable {
		base := n.DeepCopy()
		n.Spec.Unschedulable = true
		if err := wc.Patch(ctx, n, client.MergeFrom(base)); err != nil {
			return ctrl.Result{}, fmt.Errorf("cordoning node %s of cluster %s: %w", node, cluster.Name, err)
		}
	}
	var pods corev1.PodList
	if err := wc.List(ctx, &pods, managedBy, client.MatchingFields{"spec.nodeName": node}); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing the Pods on node %s of cluster %s: %w", node, cluster.Name, err)
	}
	left := 0
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		left++
		if err := rollOff(ctx, wc, p, node); err != nil {
			return ctrl.Result{}, err
		}
	}
	if left > 0 {
		logf.FromContext(ctx).Info("Rolling the platform's Pods off the worker before it is drained", "node", node, "pods", left)
		return ctrl.Result{RequeueAfter: recheck}, nil
	}
	return ctrl.Result{}, r.release(ctx, m, corev1.EventTypeNormal, "AppsMoved",
		fmt.Sprintf("The apps' Pods on %s run on other workers: the worker may be drained", node))
}

// otherWorkers counts the Ready, schedulable workers of the cluster other
// than node.
func otherWorkers(ctx context.Context, wc client.Client, node string) (int, error) {
	var nodes corev1.NodeList
	if err := wc.List(ctx, &nodes); err != nil {
		return 0, fmt.Errorf("listing nodes: %w", err)
	}
	count := 0
	for _, n := range nodes.Items {
		if _, cp := n.Labels["node-role.kubernetes.io/control-plane"]; cp || n.Name == node || n.Spec.Unschedulable {
			continue
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				count++
			}
		}
	}
	return count, nil
}

// rollOff rolls the Deployment that owns the Pod, once per node.
func rollOff(ctx context.Context, wc client.Client, p *corev1.Pod, node string) error {
	rsRef := metav1.GetControllerOf(p)
	if rsRef == nil || rsRef.Kind != "ReplicaSet" {
		return nil // not a Deployment's: the drain evicts it
	}
	rs := &appsv1.ReplicaSet{}
	if err := wc.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: rsRef.Name}, rs); err != nil {
		return client.IgnoreNotFound(err)
	}
	depRef := metav1.GetControllerOf(rs)
	if depRef == nil || depRef.Kind != "Deployment" {
		return nil
	}
	d := &appsv1.Deployment{}
	if err := wc.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: depRef.Name}, d); err != nil {
		return client.IgnoreNotFound(err)
	}
	if d.Spec.Template.Annotations[MovedOffAnnotation] == node {
		return nil
	}
	base := d.DeepCopy()
	if d.Spec.Template.Annotations == nil {
		d.Spec.Template.Annotations = map[string]string{}
	}
	d.Spec.Template.Annotations[MovedOffAnnotation] = node
	if err := wc.Patch(ctx, d, client.MergeFrom(base), client.FieldOwner("bex-workerhook")); err != nil {
		return fmt.Errorf("rolling deployment %s/%s off node %s: %w", d.Namespace, d.Name, node, err)
	}
	logf.FromContext(ctx).Info("Rolling a deployment off the worker", "deployment", d.Namespace+"/"+d.Name, "node", node)
	return nil
}
