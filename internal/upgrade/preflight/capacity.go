package preflight

import (
	"context"
	"errors"
	"fmt"

	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"bex.co/bex/internal/hetzner"
)

// Capacity says whether the cloud account behind a cluster can hold one
// more control-plane machine while a surging rollout (maxSurge 1) replaces
// one. Implementations must not change anything. An error means "could not
// tell" and becomes a Warning, not a Blocker; it must honour ctx.
type Capacity interface {
	SurgeCapacity(ctx context.Context, cluster *clusterv1.Cluster, kcp *controlplanev1.KubeadmControlPlane) (SurgeCapacity, error)
}

// SurgeCapacity is a Capacity's answer.
type SurgeCapacity struct {
	// Available is true when the surge machine can be created.
	Available bool
	// Message says what was found, for the finding's message.
	Message string
	// Evidence is what it was read from.
	Evidence string
}

// HetznerCapacity answers Capacity from a Hetzner Cloud account.
type HetznerCapacity struct {
	// Account reads the project the cluster's servers live in.
	Account *hetzner.Account
	// Resolve returns the server type and location of the cluster's
	// control-plane machines (CAPH's HCloudMachineTemplate and
	// HetznerCluster).
	Resolve func(ctx context.Context, cluster *clusterv1.Cluster, kcp *controlplanev1.KubeadmControlPlane) (serverType, location string, err error)
}

var _ Capacity = HetznerCapacity{}

// SurgeCapacity implements Capacity.
func (h HetznerCapacity) SurgeCapacity(ctx context.Context, cluster *clusterv1.Cluster, kcp *controlplanev1.KubeadmControlPlane) (SurgeCapacity, error) {
	if h.Account == nil || h.Resolve == nil {
		return SurgeCapacity{}, errors.New("hetzner capacity: account or resolver missing")
	}
	serverType, location, err := h.Resolve(ctx, cluster, kcp)
	if err != nil {
		return SurgeCapacity{}, fmt.Errorf("resolving the control plane's server type: %w", err)
	}
	s, err := h.Account.SurgeCapacity(ctx, serverType, location)
	if err != nil {
		return SurgeCapacity{}, err
	}
	ev := fmt.Sprintf("hcloud server type %s in %s: available=%t", serverType, location, s.Available)
	if s.Deprecated {
		ev += fmt.Sprintf(", deprecated, unavailable after %s", s.UnavailableAfter.Format("2006-01-02"))
	}
	return SurgeCapacity{Available: s.Available, Message: s.Message, Evidence: ev}, nil
}
