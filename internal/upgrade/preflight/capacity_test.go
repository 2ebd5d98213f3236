package preflight_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"bex.co/bex/internal/hetzner"
	"bex.co/bex/internal/hetzner/hcloudfake"
	"bex.co/bex/internal/upgrade/preflight"
)

func TestHetznerCapacity(t *testing.T) {
	f := hcloudfake.New(hcloudfake.Options{})
	defer f.Close()
	f.AddLocation("fsn1", "eu-central")
	f.AddLocation("nbg1", "eu-central")
	f.AddServerType(hcloudfake.ServerTypeSpec{Name: "cx32", Locations: map[string]bool{"fsn1": true, "nbg1": false}, PriceHourly: "0.0112"})
	acct, err := hetzner.NewAccount(f.Client())
	if err != nil {
		t.Fatal(err)
	}
	resolveTo := func(st, loc string, err error) func(context.Context, *clusterv1.Cluster, *controlplanev1.KubeadmControlPlane) (string, string, error) {
		return func(context.Context, *clusterv1.Cluster, *controlplanev1.KubeadmControlPlane) (string, string, error) {
			return st, loc, err
		}
	}
	tests := []struct {
		name     string
		resolve  func(context.Context, *clusterv1.Cluster, *controlplanev1.KubeadmControlPlane) (string, string, error)
		reason   string
		severity preflight.Severity
		contains string
	}{
		{"available", resolveTo("cx32", "fsn1", nil), preflight.ReasonSurgeCapacityAvailable, preflight.Info, "available in fsn1"},
		{"out of stock", resolveTo("cx32", "nbg1", nil), preflight.ReasonInsufficientCapacity, preflight.Blocker, "out of stock in nbg1"},
		{"template unreadable", resolveTo("", "", errors.New("HCloudMachineTemplate c1-cp not found")), preflight.ReasonSurgeCapacityUnknown, preflight.Warning, "HCloudMachineTemplate c1-cp not found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := run(kcp("v1.37.2", 3, intp(1), wiredArgs...), machines(3), preflight.HetznerCapacity{Account: acct, Resolve: tt.resolve})
			got, ok := find(fs, tt.reason)
			if !ok || got.Severity != tt.severity || !strings.Contains(got.Message, tt.contains) {
				t.Fatalf("want %s %s containing %q in\n%s", tt.severity, tt.reason, tt.contains, dump(fs))
			}
		})
	}
}
