// Package cptest starts real control planes for tests: the pinned
// kube-apiserver and etcd of internal/controlplane, with the platform's CRDs
// installed, stopped when the test ends.
package cptest

import (
	"context"
	"os"
	"testing"
	"time"

	"bex.co/bex/deploy"
	"bex.co/bex/internal/controlplane"
	"bex.co/bex/internal/kubeapply"
)

// Start starts a control plane with the given apiservers (none means one at
// the default version, MVP wired), installs the platform CRDs, and stops it
// at the end of the test. Build progress of missing binaries goes to stderr.
func Start(t testing.TB, servers ...controlplane.APIServerSpec) *controlplane.ControlPlane {
	t.Helper()
	cp := StartBare(t, servers...)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := kubeapply.InstallCRDs(ctx, cp.RESTConfig(), deploy.CRDs()); err != nil {
		t.Fatalf("installing CRDs: %v", err)
	}
	return cp
}

// StartBare is Start without the CRDs.
func StartBare(t testing.TB, servers ...controlplane.APIServerSpec) *controlplane.ControlPlane {
	t.Helper()
	return StartWith(t, controlplane.Options{APIServers: servers})
}

// StartWith starts a control plane with opts, without the CRDs, and stops it
// at the end of the test. A nil opts.Log means stderr.
func StartWith(t testing.TB, opts controlplane.Options) *controlplane.ControlPlane {
	t.Helper()
	if opts.Log == nil {
		opts.Log = os.Stderr
	}
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	cp, err := controlplane.Start(ctx, opts)
	if err != nil {
		t.Fatalf("starting control plane: %v", err)
	}
	t.Cleanup(cp.Stop)
	return cp
}
