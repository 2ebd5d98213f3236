package node

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	goruntime "runtime"
	"strconv"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"bex.co/bex/internal/sandbox"
)

// nodeLeaseNamespace holds the Nodes' heartbeat Leases.
const nodeLeaseNamespace = "kube-node-lease"

// register creates the Node (or takes over the one of an earlier run of
// this agent) and posts its status, retrying until ctx ends.
func (a *Agent) register(ctx context.Context) error {
	return wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		if err := a.registerOnce(ctx); err != nil {
			a.opts.Log.Error(err, "Registering the node, retrying")
			return false, nil
		}
		return true, nil
	})
}

func (a *Agent) registerOnce(ctx context.Context) error {
	labels := map[string]string{
		"kubernetes.io/hostname": a.opts.NodeName,
		"kubernetes.io/os":       goruntime.GOOS,
		"kubernetes.io/arch":     goruntime.GOARCH,
	}
	for k, v := range a.opts.Labels {
		labels[k] = v
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: a.opts.NodeName, Labels: labels},
		Spec:       corev1.NodeSpec{ProviderID: a.opts.ProviderID, Taints: a.opts.Taints},
	}
	nodes := a.opts.Client.CoreV1().Nodes()
	if _, err := nodes.Create(ctx, node, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating Node %s: %w", a.opts.NodeName, err)
	}
	return a.updateStatus(ctx)
}

// updateStatus posts the Node's status: capacity, addresses, the API's
// port, what runs it, and the Ready condition with a fresh heartbeat.
func (a *Agent) updateStatus(ctx context.Context) error {
	nodes := a.opts.Client.CoreV1().Nodes()
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := nodes.Get(ctx, a.opts.NodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		now := metav1.Now()
		n.Status.Capacity = a.opts.Capacity.DeepCopy()
		n.Status.Allocatable = a.opts.Capacity.DeepCopy()
		n.Status.Addresses = []corev1.NodeAddress{
			{Type: corev1.NodeInternalIP, Address: a.opts.Address.String()},
			{Type: corev1.NodeHostName, Address: a.opts.NodeName},
		}
		n.Status.DaemonEndpoints.KubeletEndpoint.Port = int32(a.opts.Port)
		n.Status.NodeInfo = a.nodeInfo
		type cond struct {
			typ             corev1.NodeConditionType
			status          corev1.ConditionStatus
			reason, message string
		}
		for _, c := range []cond{
			{corev1.NodeReady, corev1.ConditionTrue, "KubeletReady", "bex-node is posting ready status"},
			{corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory", "bex-node has sufficient memory available"},
			{corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure", "bex-node has no disk pressure"},
			{corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID", "bex-node has sufficient PID available"},
		} {
			setNodeCondition(n, corev1.NodeCondition{Type: c.typ, Status: c.status, Reason: c.reason, Message: c.message,
				LastHeartbeatTime: now, LastTransitionTime: now})
		}
		_, err = nodes.UpdateStatus(ctx, n, metav1.UpdateOptions{})
		return err
	})
}

// setNodeCondition sets c on n, keeping the transition time of a condition
// whose status did not change.
func setNodeCondition(n *corev1.Node, c corev1.NodeCondition) {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == c.Type {
			if n.Status.Conditions[i].Status == c.Status {
				c.LastTransitionTime = n.Status.Conditions[i].LastTransitionTime
			}
			n.Status.Conditions[i] = c
			return
		}
	}
	n.Status.Conditions = append(n.Status.Conditions, c)
}

// postStatus posts the Node's status every StatusInterval until ctx ends.
func (a *Agent) postStatus(ctx context.Context) {
	t := time.NewTicker(a.opts.StatusInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := a.updateStatus(ctx); err != nil && ctx.Err() == nil {
				a.opts.Log.Error(err, "Posting the node's status")
			}
		}
	}
}

// renewLease keeps the Node's Lease in kube-node-lease renewed, four times
// per LeaseDuration, as the kubelet does; the node lifecycle controller
// reads it as the node's heartbeat.
func (a *Agent) renewLease(ctx context.Context) {
	interval := a.opts.LeaseDuration / 4
	for {
		if err := a.renewLeaseOnce(ctx); err != nil && ctx.Err() == nil {
			a.opts.Log.Error(err, "Renewing the node's lease")
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(interval):
		}
	}
}

func (a *Agent) renewLeaseOnce(ctx context.Context) error {
	leases := a.opts.Client.CoordinationV1().Leases(nodeLeaseNamespace)
	now := metav1.NewMicroTime(time.Now())
	l, err := leases.Get(ctx, a.opts.NodeName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		n, err := a.opts.Client.CoreV1().Nodes().Get(ctx, a.opts.NodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		l = &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: a.opts.NodeName, Namespace: nodeLeaseNamespace,
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: n.Name, UID: n.UID}}},
			Spec: coordinationv1.LeaseSpec{
				HolderIdentity:       ptr.To(a.opts.NodeName),
				LeaseDurationSeconds: ptr.To(int32(a.opts.LeaseDuration.Seconds())),
				RenewTime:            &now,
			},
		}
		_, err = leases.Create(ctx, l, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	l.Spec.HolderIdentity = ptr.To(a.opts.NodeName)
	l.Spec.LeaseDurationSeconds = ptr.To(int32(a.opts.LeaseDuration.Seconds()))
	l.Spec.RenewTime = &now
	_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
	return err
}

// memTotal is the machine's memory in bytes, from /proc/meminfo.
func memTotal() (int64, error) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if f := strings.Fields(s.Text()); len(f) >= 2 && f[0] == "MemTotal:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("no MemTotal in /proc/meminfo")
}

// nodeInfo is what the Node's status says runs it.
func nodeInfo(kubeletVersion string, sb *sandbox.Manager) corev1.NodeSystemInfo {
	read := func(path string) string {
		b, _ := os.ReadFile(path)
		return strings.TrimSpace(string(b))
	}
	return corev1.NodeSystemInfo{
		KubeletVersion:          kubeletVersion,
		OperatingSystem:         goruntime.GOOS,
		Architecture:            goruntime.GOARCH,
		ContainerRuntimeVersion: "runc://" + sb.RuncVersion(),
		KernelVersion:           read("/proc/sys/kernel/osrelease"),
		BootID:                  read("/proc/sys/kernel/random/boot_id"),
	}
}
