package capi

import (
	"context"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The webhook configurations KCP's probe is answered by: the last of each
// kind registerWebhooks applies.
const (
	kcpDefaultingWebhook = "default.kubeadmcontrolplane.controlplane.cluster.x-k8s.io"
	kcpValidatingWebhook = "validation.kubeadmcontrolplane.controlplane.cluster.x-k8s.io"
)

// waitWebhooksServed returns once the apiserver calls the managers'
// webhooks. It picks up webhook configurations asynchronously, and until it
// has them it admits Cluster API objects unchecked and undefaulted; KCP
// cannot reconcile a KubeadmControlPlane without the defaulted rollout
// strategy. The probe is two dry-run creates of a KubeadmControlPlane: one
// without a rollout strategy must come back defaulted, one with maxSurge 0
// and one replica must be denied. Each kind of configuration is read from
// one watch, in order, and KCP's are applied last, so once both answer, every
// manager's webhooks are in force.
func waitWebhooksServed(ctx context.Context, cfg *rest.Config, namespace string, timeout time.Duration) error {
	scheme := runtime.NewScheme()
	if err := controlplanev1.AddToScheme(scheme); err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return fmt.Errorf("creating a client: %w", err)
	}
	probe := func(replicas int32, maxSurge *intstr.IntOrString) *controlplanev1.KubeadmControlPlane {
		kcp := &controlplanev1.KubeadmControlPlane{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "bex-webhook-probe"},
			Spec: controlplanev1.KubeadmControlPlaneSpec{
				Replicas: ptr.To(replicas),
				Version:  "v1.36.3",
			},
		}
		kcp.Spec.MachineTemplate.Spec.InfrastructureRef.APIGroup = "infrastructure.cluster.x-k8s.io"
		kcp.Spec.MachineTemplate.Spec.InfrastructureRef.Kind = "ProbeMachineTemplate"
		kcp.Spec.MachineTemplate.Spec.InfrastructureRef.Name = "bex-webhook-probe"
		if maxSurge != nil {
			kcp.Spec.Rollout.Strategy.Type = controlplanev1.RollingUpdateStrategyType
			kcp.Spec.Rollout.Strategy.RollingUpdate.MaxSurge = maxSurge
		}
		return kcp
	}
	served := func() error {
		defaulted := probe(3, nil)
		if err := c.Create(ctx, defaulted, client.DryRunAll); err != nil {
			return fmt.Errorf("dry-run create: %w", err)
		}
		if defaulted.Spec.Rollout.Strategy.Type == "" {
			return fmt.Errorf("webhook %s not called yet", kcpDefaultingWebhook)
		}
		err := c.Create(ctx, probe(1, ptr.To(intstr.FromInt32(0))), client.DryRunAll)
		if err == nil || !strings.Contains(err.Error(), kcpValidatingWebhook) {
			return fmt.Errorf("webhook %s not called yet (%v)", kcpValidatingWebhook, err)
		}
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		last := served()
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for the apiserver to call the webhooks: %w (last: %v)", ctx.Err(), last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
