package app

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/version"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "bex.co/bex/apis/infrastructure/v1alpha1"
	"bex.co/bex/controllers/localinfra"
	"bex.co/bex/internal/controlplane"
	"bex.co/bex/internal/localfleet"
	"bex.co/bex/internal/upgrade/plan"
	"bex.co/bex/internal/upgrade/preflight"
	"bex.co/bex/web/api"
)

// The platform's own plane as a cluster of the local fleet
// (Options.ManagedPlane).
const (
	// planeName is the plane's name with the Host, the LocalCluster's
	// spec.plane and the Cluster's name, in api.LocalClusterNamespace.
	planeName = "management"
	// firstAPIServer is the plane's own kube-apiserver, which serves it
	// until the cluster's machines do.
	firstAPIServer = "kube-apiserver-1"
	planeReplicas  = 3
)

// planeVersion returns the version the plane's first kube-apiserver starts
// at: o.KubeVersion, or the newest version the plane's machines ran when
// Cluster API took it over in an earlier run (a kube-apiserver must not
// serve what a newer one wrote).
func (o *Options) planeVersion() (string, error) {
	ran, err := o.planeMachineVersions()
	if err != nil {
		return "", err
	}
	newest := o.KubeVersion
	newestV, err := version.ParseGeneric(newest)
	if err != nil {
		return "", fmt.Errorf("--kube-version %q: %w", newest, err)
	}
	for _, v := range ran {
		a, err := version.ParseGeneric(v)
		if err != nil {
			return "", fmt.Errorf("a machine of the plane ran version %q: %w", v, err)
		}
		if a.GreaterThan(newestV) {
			newest, newestV = v, a
		}
	}
	return newest, nil
}

// planeMachineVersions returns the versions the plane's machines last ran
// (none when Cluster API never took it over), from their files in the
// state directory.
func (o *Options) planeMachineVersions() ([]string, error) {
	ran, err := localfleet.MachineVersions(filepath.Join(o.StateDir, "fleet"), api.LocalClusterNamespace, planeName)
	if err != nil {
		return nil, fmt.Errorf("reading the versions of the plane's machines: %w", err)
	}
	return ran, nil
}

// checkPlaneUnmanaged refuses to start the plane without
// Options.ManagedPlane once Cluster API's machines served it: they hold
// its state (a kube-apiserver of --kube-version could be older than what
// they wrote), and nothing else would start them.
func (o *Options) checkPlaneUnmanaged() error {
	if o.ManagedPlane {
		return nil
	}
	ran, err := o.planeMachineVersions()
	if err != nil {
		return err
	}
	if len(ran) > 0 {
		slices.Sort(ran)
		return fmt.Errorf("the control plane of %s is managed by Cluster API (cluster %s/%s, machines of %s): start with --managed-control-plane, as make run does, or remove %s to start over",
			o.StateDir, api.LocalClusterNamespace, planeName, strings.Join(slices.Compact(ran), ", "), o.StateDir)
	}
	return nil
}

// planeObjects returns the objects of the cluster that takes the plane
// over: three machines of version, MVP wired unless noMVP, labelled the
// management cluster, in a free address block.
func planeObjects(ctx context.Context, kube client.Client, cp *controlplane.ControlPlane, version string, noMVP bool) ([]client.Object, error) {
	var lcs infrav1.LocalClusterList
	if err := kube.List(ctx, &lcs); err != nil {
		return nil, fmt.Errorf("listing local clusters: %w", err)
	}
	block, err := localfleet.FreeBlock(localinfra.Blocks(lcs.Items))
	if err != nil {
		return nil, err
	}
	authorities, err := cp.Authorities()
	if err != nil {
		return nil, err
	}
	o := localinfra.ClusterOptions{
		Namespace: api.LocalClusterNamespace, Name: planeName, Version: "v" + version, ControlPlaneReplicas: planeReplicas, Block: block,
		Labels: map[string]string{plan.ManagementLabel: "true"},
		Plane:  planeName, PlaneEtcdURL: cp.Etcd().URL(), PlaneAuthorities: &authorities,
	}
	objs := localinfra.ClusterObjects(o)
	if !noMVP {
		for _, obj := range objs {
			if kcp, ok := obj.(*controlplanev1.KubeadmControlPlane); ok {
				kcp.Spec.KubeadmConfigSpec.ClusterConfiguration.APIServer.ExtraArgs = preflight.WireMVPPatch(kcp, o.Version, true)
			}
		}
	}
	return objs, nil
}

// takeOverPlane has the cluster "management" take the platform's plane
// over, creating its objects unless they exist, and once its machines
// serve the plane stops the plane's first kube-apiserver. It runs once
// Cluster API's managers run; what it does and what fails go to out, and
// the platform runs on meanwhile (on its first kube-apiserver).
func takeOverPlane(ctx context.Context, kube client.Client, cp *controlplane.ControlPlane, version string, noMVP bool, out io.Writer) error {
	began := time.Now()
	cluster := &clusterv1.Cluster{}
	err := kube.Get(ctx, client.ObjectKey{Namespace: api.LocalClusterNamespace, Name: planeName}, cluster)
	switch {
	case apierrors.IsNotFound(err):
		objs, err := planeObjects(ctx, kube, cp, version, noMVP)
		if err != nil {
			return err
		}
		for _, obj := range objs {
			if err := kube.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("creating %T %s: %w", obj, obj.GetName(), err)
			}
		}
		fmt.Fprintf(out, "bex: Cluster API takes the control plane over: cluster %s/%s, %d machines of v%s\n", api.LocalClusterNamespace, planeName, planeReplicas, version)
	case err != nil:
		return fmt.Errorf("reading cluster %s/%s: %w", api.LocalClusterNamespace, planeName, err)
	}
	// Its machines serve once they are in the plane's load balancer;
	// each minute says how far they are.
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	said := time.Now()
	for {
		n := machinesServing(cp)
		if n >= planeReplicas {
			break
		}
		if time.Since(said) >= time.Minute {
			said = time.Now()
			fmt.Fprintf(out, "bex: waiting for Cluster API's machines to serve the control plane: %d of %d serve (%s); bex fleet list shows them\n",
				n, planeReplicas, time.Since(began).Round(time.Second))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
	if s := cp.APIServer(firstAPIServer); s != nil && s.Running() {
		if err := cp.StopAPIServer(firstAPIServer); err != nil {
			return fmt.Errorf("stopping the plane's first kube-apiserver: %w", err)
		}
	}
	fmt.Fprintf(out, "bex: the control plane is Cluster API's: %d machines serve it (%s); its first kube-apiserver stopped\n", planeReplicas, time.Since(began).Round(time.Second))
	return nil
}

// machinesServing counts the plane's load balancer's backends that are not
// the plane's own kube-apiservers.
func machinesServing(cp *controlplane.ControlPlane) int {
	own := map[string]bool{}
	for _, s := range cp.APIServers() {
		own[s.Addr()] = true
	}
	return len(slices.DeleteFunc(cp.LoadBalancer().Backends(), func(b string) bool { return own[b] }))
}
