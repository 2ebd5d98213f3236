package localfleet

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"runtime"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
)

// What the kubelet of a kubeadm control-plane node keeps up, which Cluster
// API reads: the Node (with the control-plane label and taint kubeadm's
// mark-control-plane phase adds) and its lease, and the mirror Pods of the
// static Pods.

// controlPlaneComponents are the static Pods of a kubeadm control-plane
// node with external etcd.
var controlPlaneComponents = []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler"}

// controlPlaneLabel is kubeadm's control-plane Node label and taint key.
const controlPlaneLabel = "node-role.kubernetes.io/control-plane"

// registerNode registers the machine's Node as the kubelet does (with its
// node credentials), then labels and taints it as "kubeadm init/join phase
// mark-control-plane" does (with admin credentials: a kubelet may not set
// node-role labels on itself), and reports it ready.
func (m *Machine) registerNode(ctx context.Context) error {
	nodeCS, err := kubernetes.NewForConfig(m.node)
	if err != nil {
		return err
	}
	adminCS, err := kubernetes.NewForConfig(m.admin)
	if err != nil {
		return err
	}
	name := m.spec.Name
	// The kubelet's --node-labels (kubeletExtraArgs), then its own.
	labels, err := m.st.NodeRegistration.nodeLabels()
	if err != nil {
		return err
	}
	maps.Copy(labels, map[string]string{
		"kubernetes.io/hostname": name,
		"kubernetes.io/os":       runtime.GOOS,
		"kubernetes.io/arch":     runtime.GOARCH,
	})
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec:       corev1.NodeSpec{ProviderID: m.spec.ProviderID},
	}
	if _, err := nodeCS.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("registering Node %s: %w", name, err)
	}
	taints := m.st.NodeRegistration.nodeTaints()
	// Cluster API's Machine controller writes the Node too (its labels and
	// annotations) as soon as it exists: on a conflict, read it again, as
	// kubeadm's mark-control-plane phase does.
	var n *corev1.Node
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := adminCS.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cur.Labels == nil {
			cur.Labels = map[string]string{}
		}
		cur.Labels[controlPlaneLabel] = ""
		cur.Labels["node.kubernetes.io/exclude-from-external-load-balancers"] = ""
		for _, t := range taints {
			if !hasTaint(cur.Spec.Taints, t) {
				cur.Spec.Taints = append(cur.Spec.Taints, t)
			}
		}
		n, err = adminCS.CoreV1().Nodes().Update(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("marking Node %s as a control-plane node: %w", name, err)
	}
	m.mu.Lock()
	m.nodeUID = n.UID
	m.mu.Unlock()
	if err := m.reportNode(ctx, nodeCS, n, corev1.ConditionTrue, "KubeletReady", "kubelet is posting ready status"); err != nil {
		return err
	}
	return m.renewNodeLease(ctx)
}

// nodeLeaseSeconds is the duration of a Node's lease, the kubelet's
// default; the kubelet renews it a quarter of that apart, as heartbeat does.
const nodeLeaseSeconds = 40

// renewNodeLease creates or renews the Node's lease in kube-node-lease with
// the node's credentials, as the kubelet does: the node lifecycle
// controller of kube-controller-manager marks a Node whose lease is not
// renewed within its grace period unknown, and taints it unreachable.
func (m *Machine) renewNodeLease(ctx context.Context) error {
	cs, err := kubernetes.NewForConfig(m.node)
	if err != nil {
		return err
	}
	leases := cs.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	now := metav1.NewMicroTime(time.Now())
	spec := coordinationv1.LeaseSpec{HolderIdentity: ptr.To(m.spec.Name), LeaseDurationSeconds: ptr.To[int32](nodeLeaseSeconds), RenewTime: &now}
	l, err := leases.Get(ctx, m.spec.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		l = &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: m.spec.Name, Namespace: corev1.NamespaceNodeLease,
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: m.spec.Name, UID: m.nodeUIDOf()}}},
			Spec: spec,
		}
		if _, err := leases.Create(ctx, l, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating Node %s's lease: %w", m.spec.Name, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading Node %s's lease: %w", m.spec.Name, err)
	}
	l.Spec = spec
	if _, err := leases.Update(ctx, l, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("renewing Node %s's lease: %w", m.spec.Name, err)
	}
	return nil
}

func hasTaint(ts []corev1.Taint, t corev1.Taint) bool {
	for _, x := range ts {
		if x.Key == t.Key && x.Effect == t.Effect {
			return true
		}
	}
	return false
}

// reportNode writes the Node's status: its conditions (Ready as given, no
// pressure), addresses, version and a nominal capacity.
func (m *Machine) reportNode(ctx context.Context, cs kubernetes.Interface, n *corev1.Node, ready corev1.ConditionStatus, reason, message string) error {
	now := metav1.Now()
	cond := func(t corev1.NodeConditionType, s corev1.ConditionStatus, reason, msg string) corev1.NodeCondition {
		return corev1.NodeCondition{Type: t, Status: s, Reason: reason, Message: msg, LastHeartbeatTime: now, LastTransitionTime: now}
	}
	n.Status.Conditions = []corev1.NodeCondition{
		cond(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
		cond(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
		cond(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
		cond(corev1.NodeReady, ready, reason, message),
	}
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: m.ip.String()}, {Type: corev1.NodeHostName, Address: m.spec.Name}}
	n.Status.NodeInfo.KubeletVersion = "v" + m.spec.Version
	n.Status.NodeInfo.OperatingSystem = runtime.GOOS
	n.Status.NodeInfo.Architecture = runtime.GOARCH
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("2"),
		corev1.ResourceMemory: resource.MustParse("2Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	n.Status.Capacity, n.Status.Allocatable = capacity, capacity
	if _, err := cs.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("reporting Node %s's status: %w", n.Name, err)
	}
	return nil
}

// mirrorPodName is the name of a static Pod's mirror Pod on the machine.
func (m *Machine) mirrorPodName(component string) string { return component + "-" + m.spec.Name }

// syncMirrorPods creates the machine's mirror Pods when missing, as the
// kubelet does for its static Pods, and reports them running, the
// kube-apiserver's ready as it is ready and in the load balancer, the
// others' as their /healthz answers (the kubelet's probes). Errors are
// returned for the first registration; the supervisor retries.
func (m *Machine) syncMirrorPods(ctx context.Context) error {
	cs, err := kubernetes.NewForConfig(m.node)
	if err != nil {
		return err
	}
	for _, comp := range controlPlaneComponents {
		pods := cs.CoreV1().Pods(metav1.NamespaceSystem)
		// Create first: the Node authorizer lets a node read only the
		// Pods bound to it, so a Pod that does not exist yet cannot be
		// read.
		pod, err := pods.Create(ctx, m.mirrorPod(comp), metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			pod, err = pods.Get(ctx, m.mirrorPodName(comp), metav1.GetOptions{})
		}
		if err != nil {
			return fmt.Errorf("mirror Pod %s: %w", m.mirrorPodName(comp), err)
		}
		ready := m.isReady()
		if comp != "kube-apiserver" {
			ready = m.componentReady(ctx, comp)
		}
		if podReady(pod) == ready && pod.Status.Phase == corev1.PodRunning {
			continue
		}
		setPodStatus(pod, m.ip.String(), ready)
		if _, err := pods.UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("reporting mirror Pod %s's status: %w", pod.Name, err)
		}
	}
	return nil
}

// mirrorPod is the mirror Pod of one static Pod: the labels KubeadmControlPlane
// selects on (component, tier) and the annotations that make it a mirror
// Pod, bound to the machine's Node.
func (m *Machine) mirrorPod(component string) *corev1.Pod {
	sum := sha256.Sum256([]byte(component + "\x00" + m.spec.Name + "\x00" + m.spec.Version))
	hash := hex.EncodeToString(sum[:8])
	args := m.st.ComponentArgs[component]
	if component == "kube-apiserver" {
		args = m.st.Args
	}
	c := corev1.Container{Name: component, Image: "registry.k8s.io/" + component + ":v" + m.spec.Version,
		Command: append([]string{component}, args...)}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: m.mirrorPodName(component), Namespace: metav1.NamespaceSystem,
			Labels: map[string]string{"component": component, "tier": "control-plane"},
			// As the kubelet does: NodeRestriction lets a node create only
			// mirror Pods its Node owns.
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: m.spec.Name, UID: m.nodeUIDOf(), Controller: ptr.To(true)}},
			Annotations: map[string]string{
				corev1.MirrorPodAnnotationKey: hash,
				"kubernetes.io/config.hash":   hash,
				"kubernetes.io/config.source": "file",
			},
		},
		Spec: corev1.PodSpec{
			NodeName:          m.spec.Name,
			HostNetwork:       true,
			PriorityClassName: "system-node-critical",
			Containers:        []corev1.Container{c},
			Tolerations:       []corev1.Toleration{{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}},
		},
	}
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func setPodStatus(p *corev1.Pod, ip string, ready bool) {
	now := metav1.Now()
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	p.Status.Phase = corev1.PodRunning
	p.Status.HostIP, p.Status.PodIP = ip, ip
	p.Status.PodIPs = []corev1.PodIP{{IP: ip}}
	if p.Status.StartTime == nil {
		p.Status.StartTime = &now
	}
	p.Status.Conditions = []corev1.PodCondition{
		{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: corev1.ContainersReady, Status: status, LastTransitionTime: now},
		{Type: corev1.PodReady, Status: status, LastTransitionTime: now},
	}
	c := p.Spec.Containers[0]
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{
		Name: c.Name, Image: c.Image, ImageID: c.Image, Ready: ready, Started: &ready,
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: *p.Status.StartTime}},
	}}
}

// deleteMirrorPods deletes the machine's mirror Pods, as the pod garbage
// collector does for the Pods of a deleted Node; here through the
// machine's own kube-apiserver, which still runs.
func (m *Machine) deleteMirrorPods(ctx context.Context) error {
	cs, err := kubernetes.NewForConfig(m.local)
	if err != nil {
		return err
	}
	for _, comp := range controlPlaneComponents {
		err := cs.CoreV1().Pods(metav1.NamespaceSystem).Delete(ctx, m.mirrorPodName(comp), metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}

// markNodeLost marks the Node's readiness unknown and its mirror Pods not
// ready, through the load balancer, as the node lifecycle controller does
// for a Node whose lease is not renewed.
func (m *Machine) markNodeLost(ctx context.Context) error {
	cs, err := kubernetes.NewForConfig(m.admin)
	if err != nil {
		return err
	}
	n, err := cs.CoreV1().Nodes().Get(ctx, m.spec.Name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if err := m.reportNode(ctx, cs, n, corev1.ConditionUnknown, "NodeStatusUnknown", "Kubelet stopped posting node status."); err != nil {
		return err
	}
	pods := cs.CoreV1().Pods(metav1.NamespaceSystem)
	for _, comp := range controlPlaneComponents {
		pod, err := pods.Get(ctx, m.mirrorPodName(comp), metav1.GetOptions{})
		if err != nil {
			return err
		}
		setPodStatus(pod, m.ip.String(), false)
		if _, err := pods.UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	return nil
}

func (m *Machine) nodeUIDOf() types.UID {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.nodeUID
}
