package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"bex.co/bex/cmd/bex/app"
	"bex.co/bex/internal/controlplane/cptest"
	"bex.co/bex/web/api/apiclient"
	"bex.co/bex/web/api/apitest"
)

// TestFleetCLI runs bex fleet create, list, cordon, uncordon and delete
// against the real API; the test plays Cluster API's part: it writes the machines of a
// cluster being waited for, its worker's Node ready only once the API
// answered with the control plane healthy, and holds a deleted one with a
// finalizer.
func TestFleetCLI(t *testing.T) {
	cp := cptest.Start(t)
	fleet := &apitest.LocalFleet{}
	lists := &machineLists{}
	e := apitest.StartWith(t, cp, apitest.Options{LocalFleet: fleet, WrapKube: func(c client.Client) client.Client {
		lists.Client = c
		return lists
	}})
	none := apitest.Start(t, cp)
	ctx := t.Context()
	_, tenantToken := e.TenantToken(t, "clifleet")
	dir := t.TempDir()
	op := map[string]string{"BEX_API": e.URL, "BEX_TOKEN": e.OperatorToken}
	// What plays Cluster API runs beside the command; the test ends after
	// it.
	var bg sync.WaitGroup
	t.Cleanup(bg.Wait)

	// until polls cond in the background of a running command, until it
	// holds or a minute passes (platformtest.Eventually may not fail a
	// test from another goroutine).
	until := func(what string, cond func() bool) bool {
		deadline := time.Now().Add(time.Minute)
		for !cond() {
			if time.Now().After(deadline) {
				t.Errorf("%s: not within a minute", what)
				return false
			}
			time.Sleep(100 * time.Millisecond)
		}
		return true
	}
	// machine writes a Machine of the cluster with condition cond true
	// or false.
	machine := func(cluster, name, version string, labels map[string]string, cond string, status metav1.ConditionStatus) *clusterv1.Machine {
		labels[clusterv1.ClusterNameLabel] = cluster
		m := &clusterv1.Machine{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Labels: labels},
			Spec: clusterv1.MachineSpec{ClusterName: cluster, Version: version, Bootstrap: clusterv1.Bootstrap{DataSecretName: new("x")},
				InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.bex.co", Kind: "LocalMachine", Name: "m"}},
		}
		if err := e.Kube.Create(ctx, m); err != nil {
			t.Error(err)
			return nil
		}
		meta.SetStatusCondition(&m.Status.Conditions, metav1.Condition{Type: cond, Status: status, Reason: "Test"})
		if err := e.Kube.Status().Update(ctx, m); err != nil {
			t.Error(err)
			return nil
		}
		return m
	}
	// machinesOf writes n healthy control-plane Machines of the cluster,
	// one after the other, once its Cluster exists, and with workers a
	// worker Machine whose Node is ready only once the API has listed the
	// control plane healthy (so that --wait has seen it so).
	machinesOf := func(cluster, version string, n int, workers bool) {
		if !until("cluster "+cluster+" created", func() bool {
			return e.Kube.Get(ctx, client.ObjectKey{Namespace: "default", Name: cluster}, &clusterv1.Cluster{}) == nil
		}) {
			return
		}
		var worker *clusterv1.Machine
		if workers {
			worker = machine(cluster, cluster+"-md-0-0", version, map[string]string{clusterv1.MachineDeploymentNameLabel: cluster + "-md-0"},
				clusterv1.MachineNodeReadyCondition, metav1.ConditionFalse)
		}
		kcp := cluster + "-control-plane"
		for i := range n {
			if machine(cluster, fmt.Sprintf("%s-%d", kcp, i), version, map[string]string{clusterv1.MachineControlPlaneLabel: "", clusterv1.MachineControlPlaneNameLabel: kcp},
				controlplanev1.KubeadmControlPlaneMachineAPIServerPodHealthyCondition, metav1.ConditionTrue) == nil {
				return
			}
		}
		if worker == nil {
			return
		}
		seen := lists.n.Load()
		if !until("the API listing the healthy control plane", func() bool { return lists.n.Load() > seen }) {
			return
		}
		meta.SetStatusCondition(&worker.Status.Conditions, metav1.Condition{Type: clusterv1.MachineNodeReadyCondition, Status: metav1.ConditionTrue, Reason: "Test"})
		if err := e.Kube.Status().Update(ctx, worker); err != nil {
			t.Error(err)
		}
	}
	// finalize holds the Cluster with Cluster API's finalizer while
	// deleting is false, and lets it go then; it may run in the
	// background.
	finalize := func(cluster string, deleting bool) {
		cl := &clusterv1.Cluster{}
		if err := e.Kube.Get(ctx, client.ObjectKey{Namespace: "default", Name: cluster}, cl); err != nil {
			t.Error(err)
			return
		}
		cl.Finalizers = nil
		if !deleting {
			cl.Finalizers = []string{clusterv1.ClusterFinalizer}
		}
		if err := e.Kube.Update(ctx, cl); err != nil {
			t.Error(err)
		}
	}

	for _, tc := range []struct {
		name    string
		env     map[string]string
		args    []string
		before  func(t *testing.T)
		wantErr string
		// exit is the exit code of a failure, checked when not zero.
		exit  int
		want  string
		match string
		json  func(t *testing.T, out []byte)
	}{
		{name: "list, empty", args: []string{"fleet", "list"}, want: "No clusters. In make run, create one with: bex fleet create NAME --version VERSION\n"},
		{name: "a tenant", env: map[string]string{"BEX_API": e.URL, "BEX_TOKEN": tenantToken}, args: []string{"fleet", "list"}, wantErr: "not allowed: this needs an operator's token"},
		{name: "no local fleet", env: map[string]string{"BEX_API": none.URL, "BEX_TOKEN": none.OperatorToken}, args: []string{"fleet", "create", "dev-1", "--version", "v1.36.3"},
			wantErr: "this platform has no local fleet: its clusters come from Cluster API providers such as CAPH"},
		{name: "two machines", args: []string{"fleet", "create", "dev-1", "--version", "v1.36.3", "--control-plane-replicas", "2"},
			wantErr: "2 control-plane machines: want at least 3"},
		{name: "five workers", args: []string{"fleet", "create", "dev-1", "--version", "v1.36.3", "--workers", "5"},
			wantErr: "5 worker machines: want 0 to 4"},
		{name: "an unpinned version", args: []string{"fleet", "create", "dev-1", "--version", "1.30.1"},
			wantErr: `version "1.30.1" is not pinned: give one of v1.35.4, v1.36.3, v1.37.2 (field version)`},
		{name: "another namespace", args: []string{"fleet", "create", "prod/dev-1", "--version", "v1.36.3"}, wantErr: "local clusters live in namespace default"},
		{name: "the fleet starting", before: func(*testing.T) {
			fleet.SetNotReady(fmt.Errorf("building Cluster API's managers (see make run's output)"))
		},
			args: []string{"fleet", "create", "dev-1", "--version", "v1.36.3"}, wantErr: "the local fleet is not ready: building Cluster API's managers (see make run's output)"},
		{name: "create", before: func(*testing.T) { fleet.SetNotReady(nil) }, args: []string{"fleet", "create", "dev-1", "--version", "v1.36.3"},
			match: `^Created local cluster default/dev-1: Kubernetes v1\.36\.3, 3 control-plane machines, API at https://127\.77\.\d+\.1:6443 \(addresses 127\.77\.\d+\.0/24\)\.\n` +
				`Cluster API makes its machines one after the other \(a few minutes\)\. Follow it with:\n  bex fleet list\n$`},
		{name: "create it again", args: []string{"fleet", "create", "dev-1", "--version", "v1.36.3"}, wantErr: "cluster default/dev-1 exists already"},
		{name: "list", args: []string{"fleet", "list"}, want: "" +
			"NAME           INFRASTRUCTURE  VERSION  HEALTHY  MACHINES  WORKERS  MVP        STATE\n" +
			"default/dev-1  LocalCluster    v1.36.3  0/3      -         -        not wired  rolling\n"},
		{name: "create and wait", before: func(t *testing.T) { bg.Go(func() { machinesOf("dev-2", "v1.37.2", 3, true) }) },
			args: []string{"fleet", "create", "dev-2", "--version", "v1.37.2", "--workers", "1", "--wait"},
			match: `^Created local cluster default/dev-2: Kubernetes v1\.37\.2, 3 control-plane machines and 1 worker, .*\n` +
				`Cluster API makes its machines one after the other; waiting until they are healthy\.\n` +
				`(default/dev-2: [0-2] of 3 control-plane machines healthy, 0 of 1 workers ready\n)*` +
				`default/dev-2: 3 of 3 control-plane machines healthy, 0 of 1 workers ready\n` +
				`default/dev-2: 3 of 3 control-plane machines healthy, 1 of 1 workers ready\n$`},
		{name: "list json", args: []string{"fleet", "list", "-o", "json"}, json: func(t *testing.T, out []byte) {
			var fleet []apiclient.FleetCluster
			if err := json.Unmarshal(out, &fleet); err != nil || len(fleet) != 2 || fleet[1].Name != "default/dev-2" || len(fleet[1].Machines) != 3 || fleet[1].Infrastructure != "LocalCluster" ||
				fleet[1].WorkerReplicas != 1 || len(fleet[1].Workers) != 1 || !fleet[1].Workers[0].Healthy {
				t.Errorf("fleet = %s, %v", out, err)
			}
		}},
		{name: "list with a ready cluster", args: []string{"fleet", "list"}, want: "" +
			"NAME           INFRASTRUCTURE  VERSION  HEALTHY  MACHINES   WORKERS  MVP        STATE\n" +
			"default/dev-1  LocalCluster    v1.36.3  0/3      -          -        not wired  rolling\n" +
			"default/dev-2  LocalCluster    v1.37.2  3/3      3 v1.37.2  1/1      not wired  ready\n"},
		{name: "cordon as a tenant", env: map[string]string{"BEX_API": e.URL, "BEX_TOKEN": tenantToken}, args: []string{"fleet", "cordon", "default/dev-2"},
			wantErr: "not allowed: this needs an operator's token", exit: app.ExitAuth},
		{name: "cordon", args: []string{"fleet", "cordon", "dev-2"},
			match: `^Cluster default/dev-2 cordoned: the scheduler places no new app on it, and the App controller places the apps it runs on other clusters; .*` +
				`bex fleet uncordon default/dev-2 takes placements again\.\n$`},
		{name: "cordon again", args: []string{"fleet", "cordon", "default/dev-2"}, want: "Cluster default/dev-2 was cordoned already: nothing changed.\n"},
		{name: "list with a cordoned cluster", args: []string{"fleet", "list"}, want: "" +
			"NAME           INFRASTRUCTURE  VERSION  HEALTHY  MACHINES   WORKERS  MVP        STATE\n" +
			"default/dev-1  LocalCluster    v1.36.3  0/3      -          -        not wired  rolling\n" +
			"default/dev-2  LocalCluster    v1.37.2  3/3      3 v1.37.2  1/1      not wired  ready,cordoned\n"},
		{name: "uncordon json", args: []string{"fleet", "uncordon", "dev-2", "-o", "json"}, json: func(t *testing.T, out []byte) {
			var cc apiclient.ClusterCordon
			if err := json.Unmarshal(out, &cc); err != nil || cc.Name != "default/dev-2" || cc.Cordoned || !cc.Changed || cc.Message == "" {
				t.Errorf("uncordon = %s, %v", out, err)
			}
			cl := &clusterv1.Cluster{}
			if err := e.Kube.Get(ctx, client.ObjectKey{Namespace: "default", Name: "dev-2"}, cl); err != nil || len(cl.Annotations) != 0 {
				t.Errorf("dev-2's annotations after the uncordon: %v, %v", cl.Annotations, err)
			}
		}},
		{name: "uncordon again", args: []string{"fleet", "uncordon", "default/dev-2"}, want: "Cluster default/dev-2 was not cordoned: nothing changed.\n"},
		{name: "cordon a missing cluster", args: []string{"fleet", "cordon", "nope"},
			wantErr: "no cluster named nope in the fleet: bex fleet list shows the clusters", exit: app.ExitNotFound},
		{name: "uncordon a missing cluster of a namespace", args: []string{"fleet", "uncordon", "prod/dev-2"},
			wantErr: "no cluster prod/dev-2: bex fleet list shows the clusters", exit: app.ExitNotFound},
		{name: "cordon a bad name", args: []string{"fleet", "cordon", "prod/dev/2"}, wantErr: "give NAMESPACE/NAME as bex fleet list shows it", exit: app.ExitUsage},
		{name: "delete", args: []string{"fleet", "delete", "default/dev-1"},
			want: "Local cluster default/dev-1: deleting: Cluster API deletes its machines, then the local provider stops its processes and removes its files; bex fleet list shows it until it is gone.\n"},
		{name: "delete a missing one", args: []string{"fleet", "delete", "dev-1"}, wantErr: "no cluster default/dev-1: bex fleet list shows the clusters"},
		{name: "delete and wait", before: func(t *testing.T) {
			finalize("dev-2", false)
			bg.Go(func() {
				if until("dev-2 deleting", func() bool {
					cl := &clusterv1.Cluster{}
					return e.Kube.Get(ctx, client.ObjectKey{Namespace: "default", Name: "dev-2"}, cl) == nil && !cl.DeletionTimestamp.IsZero()
				}) {
					finalize("dev-2", true)
				}
			})
		}, args: []string{"fleet", "delete", "dev-2", "--wait"},
			match: `^Local cluster default/dev-2: deleting: .*\.\n(default/dev-2: deleting, 4 machines left\n)?default/dev-2: gone\n$`},
		// Clusters of another provider, in other namespaces.
		{name: "cordon a cluster of another provider", before: func(t *testing.T) { e.CreateCluster(t, "prod", "edge-1", "v1.36.3", nil) },
			args: []string{"fleet", "cordon", "edge-1"}, match: `^Cluster prod/edge-1 cordoned: `},
		{name: "cordon a name two clusters have", before: func(t *testing.T) { e.CreateCluster(t, "staging", "edge-1", "v1.36.3", nil) },
			args: []string{"fleet", "cordon", "edge-1"}, wantErr: "clusters named edge-1 are in namespaces prod, staging: give NAMESPACE/NAME", exit: app.ExitUsage},
		{name: "list with a cordoned cluster of another provider", args: []string{"fleet", "list"}, want: "" +
			"NAME            INFRASTRUCTURE  VERSION  HEALTHY  MACHINES  WORKERS  MVP        STATE\n" +
			"prod/edge-1     -               v1.36.3  0/3      -         -        not wired  rolling,cordoned\n" +
			"staging/edge-1  -               v1.36.3  0/3      -         -        not wired  rolling\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.before != nil {
				tc.before(t)
			}
			if tc.env == nil {
				tc.env = op
			}
			out, err := bex(t, dir, tc.env, "", tc.args...)
			if err != nil && tc.exit != 0 {
				if code := app.ErrorOf(err).ExitCode(); code != tc.exit {
					t.Errorf("bex %v: exit %d (%v), want %d", tc.args, code, err, tc.exit)
				}
			}
			if !checkRun(t, tc.args, out, err, tc.wantErr, tc.want, tc.match) {
				return
			}
			if tc.json != nil {
				tc.json(t, []byte(out))
			}
		})
	}
}

// machineLists counts the API's lists of Machines (one per GET /fleet).
type machineLists struct {
	client.Client
	n atomic.Int64
}

func (c *machineLists) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if _, ok := list.(*clusterv1.MachineList); ok {
		c.n.Add(1)
	}
	return c.Client.List(ctx, list, opts...)
}
