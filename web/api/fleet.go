package api

import (
	"cmp"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"bex.co/bex/internal/upgrade/plan"
	"bex.co/bex/internal/upgrade/preflight"
	"bex.co/bex/web/api/apiclient"
)

// listFleet answers the Cluster API clusters of the management cluster,
// each with its control plane's machines, its MachineDeployments' workers
// and whether its apiserver flags run the Mixed Version Proxy (the
// preflight's wiring, gate and peer address checks).
func (s *Server) listFleet(c echo.Context) error {
	ctx := c.Request().Context()
	var clusters clusterv1.ClusterList
	if err := s.kube.List(ctx, &clusters); err != nil {
		if meta.IsNoMatchError(err) {
			return noClusterAPI(err)
		}
		return fmt.Errorf("listing clusters: %w", err)
	}
	var kcps controlplanev1.KubeadmControlPlaneList
	if err := s.kube.List(ctx, &kcps); err != nil && !meta.IsNoMatchError(err) {
		return fmt.Errorf("listing control planes: %w", err)
	}
	var mds clusterv1.MachineDeploymentList
	if err := s.kube.List(ctx, &mds); err != nil && !meta.IsNoMatchError(err) {
		return fmt.Errorf("listing machine deployments: %w", err)
	}
	var machines clusterv1.MachineList
	if err := s.kube.List(ctx, &machines); err != nil {
		return fmt.Errorf("listing machines: %w", err)
	}
	views := make([]apiclient.FleetCluster, 0, len(clusters.Items))
	for i := range clusters.Items {
		v := fleetClusterView(&clusters.Items[i], kcps.Items, machines.Items)
		v.WorkerReplicas, v.Workers = fleetWorkers(&clusters.Items[i], mds.Items, machines.Items)
		views = append(views, v)
	}
	slices.SortFunc(views, func(a, b apiclient.FleetCluster) int { return strings.Compare(a.Name, b.Name) })
	return c.JSON(http.StatusOK, views)
}

func fleetClusterView(cl *clusterv1.Cluster, kcps []controlplanev1.KubeadmControlPlane, machines []clusterv1.Machine) apiclient.FleetCluster {
	v := apiclient.FleetCluster{
		Name:           cl.Namespace + "/" + cl.Name,
		Paused:         ptr.Deref(cl.Spec.Paused, false),
		Management:     cl.Labels[plan.ManagementLabel] == "true",
		Infrastructure: cl.Spec.InfrastructureRef.Kind,
		Deleting:       !cl.DeletionTimestamp.IsZero(),
		Cordoned:       isCordoned(cl),
		Machines:       []apiclient.FleetMachine{},
	}
	ref := cl.Spec.ControlPlaneRef
	var kcp *controlplanev1.KubeadmControlPlane
	if ref.Kind == "KubeadmControlPlane" {
		for i := range kcps {
			if kcps[i].Namespace == cl.Namespace && kcps[i].Name == ref.Name {
				kcp = &kcps[i]
			}
		}
	}
	if kcp == nil {
		v.MVP = apiclient.FleetMVP{Findings: []apiclient.FleetFinding{{Reason: preflight.ReasonNoControlPlane,
			Message: "the cluster has no KubeadmControlPlane: bex upgrades only kubeadm control planes"}}}
		return v
	}
	v.ControlPlane = kcp.Namespace + "/" + kcp.Name
	v.Version = kcp.Spec.Version
	v.Replicas = ptr.Deref(kcp.Spec.Replicas, 1)
	if ms := kcp.Spec.Rollout.Strategy.RollingUpdate.MaxSurge; ms != nil {
		v.MaxSurge = ms.String()
	}
	wired, findings := preflight.MVPWired(kcp)
	v.MVP.Wired = wired
	for _, f := range findings {
		v.MVP.Findings = append(v.MVP.Findings, apiclient.FleetFinding{
			Reason: f.Reason, Severity: string(f.Severity), Message: f.Message, FixedByWireMVP: f.FixedByWireMVP,
		})
	}
	for i := range machines {
		m := &machines[i]
		if m.Namespace != kcp.Namespace || m.Labels[clusterv1.MachineControlPlaneNameLabel] != kcp.Name {
			continue
		}
		v.Machines = append(v.Machines, fleetMachineView(m, controlplanev1.KubeadmControlPlaneMachineAPIServerPodHealthyCondition))
	}
	sortMachines(v.Machines)
	return v
}

// fleetWorkers returns how many workers the cluster's MachineDeployments
// want and their machines, each healthy while its Node is ready (Cluster
// API's NodeReady condition of the Machine).
func fleetWorkers(cl *clusterv1.Cluster, mds []clusterv1.MachineDeployment, machines []clusterv1.Machine) (int32, []apiclient.FleetMachine) {
	var want int32
	for _, md := range mds {
		if md.Namespace == cl.Namespace && md.Spec.ClusterName == cl.Name {
			want += ptr.Deref(md.Spec.Replicas, 1)
		}
	}
	workers := []apiclient.FleetMachine{}
	for i := range machines {
		m := &machines[i]
		if m.Namespace != cl.Namespace || m.Spec.ClusterName != cl.Name || m.Labels[clusterv1.MachineDeploymentNameLabel] == "" {
			continue
		}
		workers = append(workers, fleetMachineView(m, clusterv1.MachineNodeReadyCondition))
	}
	sortMachines(workers)
	return want, workers
}

// fleetMachineView is m as the fleet shows it, healthy when its condition
// healthy is true.
func fleetMachineView(m *clusterv1.Machine, healthy string) apiclient.FleetMachine {
	mv := apiclient.FleetMachine{
		Name:      m.Name,
		Node:      m.Status.NodeRef.Name,
		Version:   m.Spec.Version,
		Healthy:   meta.IsStatusConditionTrue(m.Status.Conditions, healthy),
		Deleting:  !m.DeletionTimestamp.IsZero(),
		CreatedAt: m.CreationTimestamp.UTC(),
	}
	for _, a := range m.Status.Addresses {
		if a.Type == clusterv1.MachineInternalIP && mv.Address == "" {
			mv.Address = a.Address
		}
	}
	return mv
}

// sortMachines sorts machines oldest first.
func sortMachines(ms []apiclient.FleetMachine) {
	slices.SortFunc(ms, func(a, b apiclient.FleetMachine) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), strings.Compare(a.Name, b.Name))
	})
}
