package capi_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"bex.co/bex/internal/capi"
	"bex.co/bex/internal/controlplane/cptest"
	"bex.co/bex/internal/kubeapply"
	"bex.co/bex/internal/kubebin"
)

// fixtureGroup is the API group of the stand-in infrastructure kinds the
// test's KubeadmControlPlane clones its machines from: CRDs only, with
// Cluster API's contract label, and no controller.
const fixtureGroup = "infrastructure.capitest.bex.co"

// fixtureCRDs are FixtureMachine and FixtureMachineTemplate.
func fixtureCRDs() fstest.MapFS {
	crd := func(plural, kind string, status bool) string {
		sub := ""
		if status {
			sub = "\n    subresources:\n      status: {}"
		}
		return fmt.Sprintf(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: %[1]s.%[3]s
  labels:
    cluster.x-k8s.io/v1beta2: v1alpha1
spec:
  group: %[3]s
  scope: Namespaced
  names:
    plural: %[1]s
    singular: %[4]s
    kind: %[2]s
    listKind: %[2]sList
  versions:
  - name: v1alpha1
    served: true
    storage: true%[5]s
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
`, plural, kind, fixtureGroup, strings.ToLower(kind), sub)
	}
	return fstest.MapFS{
		"machines.yaml":  {Data: []byte(crd("fixturemachines", "FixtureMachine", true))},
		"templates.yaml": {Data: []byte(crd("fixturemachinetemplates", "FixtureMachineTemplate", false))},
	}
}

// TestManagersReconcile starts the three pinned managers against a real
// apiserver and checks that each acts on a Cluster with a
// KubeadmControlPlane: the core manager's finalizer and owner reference,
// the webhooks' defaulting and refusal, the conversion webhook, KCP's
// certificates and first Machine, and the bootstrap provider's data. None
// of it happens without the managers. Then it stops them and starts them
// again on the same directory, as a restart of make run would.
func TestManagersReconcile(t *testing.T) {
	ctrl.SetLogger(logr.Discard())
	cp := cptest.StartBare(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	dir := t.TempDir()
	start := time.Now()
	ms, err := capi.Start(ctx, capi.Options{Kubeconfig: cp.KubeconfigPath(), Dir: dir, Log: os.Stderr})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the managers answered /readyz and their webhooks were registered in %s", time.Since(start).Round(100*time.Millisecond))
	t.Cleanup(func() {
		ms.Stop()
		if t.Failed() {
			for _, m := range ms.List() {
				logTail(t, m)
			}
		}
	})
	if _, err := kubeapply.InstallCRDs(ctx, cp.RESTConfig(), fixtureCRDs()); err != nil {
		t.Fatal(err)
	}
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, clusterv1.AddToScheme, controlplanev1.AddToScheme, bootstrapv1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	c, err := client.New(cp.RESTConfig(), client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	// poll gives each step two minutes; the managers take seconds.
	poll := func(what string, cond func() string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		last := ""
		for {
			if last = cond(); last == "" {
				return
			}
			select {
			case <-ctx.Done():
				t.Fatalf("%s: never happened; last: %s", what, last)
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	const ns = "default"

	// The validating webhook refuses what only it checks: maxSurge 0 with
	// fewer than three replicas. Start returns once the apiserver calls it.
	err = c.Create(ctx, kcp(ns, "invalid", 1, 0), client.DryRunAll)
	if err == nil || !strings.Contains(err.Error(), `admission webhook "validation.kubeadmcontrolplane.controlplane.cluster.x-k8s.io" denied the request`) {
		t.Errorf("maxSurge 0 with one replica: err = %v, want KCP's webhook to deny it", err)
	}
	// The defaulting webhook fills in what KCP cannot run without.
	bare := kcp(ns, "bare", 3, 0)
	bare.Spec.Rollout = controlplanev1.KubeadmControlPlaneRolloutSpec{}
	if err := c.Create(ctx, bare, client.DryRunAll); err != nil {
		t.Fatal(err)
	}
	if s := bare.Spec.Rollout.Strategy; s.Type != controlplanev1.RollingUpdateStrategyType || s.RollingUpdate.MaxSurge == nil || s.RollingUpdate.MaxSurge.IntValue() != 1 {
		t.Errorf("defaulted rollout strategy %+v, want RollingUpdate with maxSurge 1", s)
	}

	template := &unstructured.Unstructured{}
	template.SetAPIVersion(fixtureGroup + "/v1alpha1")
	template.SetKind("FixtureMachineTemplate")
	template.SetNamespace(ns)
	template.SetName("fleet-1")
	if err := unstructured.SetNestedMap(template.Object, map[string]any{"spec": map[string]any{"size": "small"}}, "spec", "template"); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, template); err != nil {
		t.Fatal(err)
	}
	// No infrastructureRef: the core manager then counts the cluster's
	// infrastructure as provisioned.
	cluster := &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fleet-1"},
		Spec: clusterv1.ClusterSpec{
			ControlPlaneEndpoint: clusterv1.APIEndpoint{Host: "127.0.0.1", Port: 6443},
			ControlPlaneRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: controlplanev1.GroupVersion.Group, Kind: "KubeadmControlPlane", Name: "fleet-1",
			},
		},
	}
	if err := c.Create(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	plane := kcp(ns, "fleet-1", 3, 0)
	if err := c.Create(ctx, plane); err != nil {
		t.Fatal(err)
	}

	// Core manager: the Cluster's finalizer, and the Cluster as the
	// KubeadmControlPlane's owner.
	poll("the Cluster's finalizer", func() string {
		got := &clusterv1.Cluster{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(cluster), got); err != nil {
			return err.Error()
		}
		if !slices.Contains(got.Finalizers, clusterv1.ClusterFinalizer) {
			return fmt.Sprintf("finalizers %v", got.Finalizers)
		}
		return ""
	})
	// KCP: its finalizer, the cluster's CA, a first Machine cloned from
	// the template, and its status.
	poll("KCP's finalizer, owner and status", func() string {
		got := &controlplanev1.KubeadmControlPlane{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(plane), got); err != nil {
			return err.Error()
		}
		owned := slices.ContainsFunc(got.OwnerReferences, func(r metav1.OwnerReference) bool { return r.Kind == "Cluster" && r.Name == cluster.Name })
		if !owned || !slices.Contains(got.Finalizers, controlplanev1.KubeadmControlPlaneFinalizer) {
			return fmt.Sprintf("owners %v, finalizers %v", got.OwnerReferences, got.Finalizers)
		}
		if got.Status.Replicas == nil || *got.Status.Replicas < 1 || len(got.Status.Conditions) == 0 {
			return fmt.Sprintf("status %+v", got.Status)
		}
		return ""
	})
	poll("the cluster CA KCP generates", func() string {
		s := &corev1.Secret{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: cluster.Name + "-ca"}, s); err != nil {
			return err.Error()
		}
		if len(s.Data["tls.crt"]) == 0 || len(s.Data["tls.key"]) == 0 {
			return "no key pair"
		}
		return ""
	})
	var machine clusterv1.Machine
	poll("KCP's first Machine, its infrastructure cloned from the template", func() string {
		var list clusterv1.MachineList
		if err := c.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{clusterv1.MachineControlPlaneNameLabel: plane.Name}); err != nil {
			return err.Error()
		}
		if len(list.Items) != 1 {
			return fmt.Sprintf("%d Machines", len(list.Items))
		}
		machine = list.Items[0]
		infra := &unstructured.Unstructured{}
		infra.SetAPIVersion(fixtureGroup + "/v1alpha1")
		infra.SetKind("FixtureMachine")
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: machine.Spec.InfrastructureRef.Name}, infra); err != nil {
			return err.Error()
		}
		if size, _, _ := unstructured.NestedString(infra.Object, "spec", "size"); size != "small" {
			return fmt.Sprintf("infrastructure machine spec %v", infra.Object["spec"])
		}
		return ""
	})
	// Bootstrap provider: kubeadm init data for the first Machine, which
	// the core manager then hands to the Machine.
	poll("the bootstrap data of the first Machine", func() string {
		got := &clusterv1.Machine{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(&machine), got); err != nil {
			return err.Error()
		}
		if got.Spec.Bootstrap.DataSecretName == nil {
			return "Machine has no bootstrap data secret"
		}
		s := &corev1.Secret{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: *got.Spec.Bootstrap.DataSecretName}, s); err != nil {
			return err.Error()
		}
		if string(s.Data["format"]) != "cloud-config" || !strings.Contains(string(s.Data["value"]), "kubeadm init") {
			return fmt.Sprintf("bootstrap data of format %q", s.Data["format"])
		}
		return ""
	})
	// Conversion webhook: read as v1beta1, the KubeadmControlPlane has
	// v1beta1's shape, which only KCP's /convert produces.
	old := &unstructured.Unstructured{}
	old.SetAPIVersion(controlplanev1.GroupVersion.Group + "/v1beta1")
	old.SetKind("KubeadmControlPlane")
	if err := c.Get(ctx, client.ObjectKeyFromObject(plane), old); err != nil {
		t.Fatal(err)
	}
	if typ, _, _ := unstructured.NestedString(old.Object, "spec", "rolloutStrategy", "type"); typ != "RollingUpdate" {
		t.Errorf("v1beta1 spec.rolloutStrategy.type = %q, want RollingUpdate (spec: %v)", typ, old.Object["spec"])
	}

	for _, m := range ms.List() {
		if !m.Running() {
			t.Errorf("%s exited", m.Name)
		}
		data, err := os.ReadFile(m.LogFile)
		if want := "Version: " + kubebin.ToolVersion(m.Name); err != nil || !strings.Contains(string(data), want) {
			t.Errorf("%s's log does not say %q (%v)", m.Name, want, err)
		}
	}
	ms.Stop()
	for _, m := range ms.List() {
		if m.Running() {
			t.Errorf("%s still runs after Stop", m.Name)
		}
	}
	// The webhooks stay registered: with the managers down, writes of
	// Cluster API objects fail rather than pass unchecked.
	if err := c.Create(ctx, kcp(ns, "while-down", 3, 0), client.DryRunAll); err == nil || !strings.Contains(err.Error(), "failed calling webhook") {
		t.Errorf("with the managers stopped: err = %v, want a failed webhook call", err)
	}

	// A second Start with the same directory keeps the CA and points the
	// webhooks at the new ports: the managers act again.
	caBefore, err := os.ReadFile(filepath.Join(dir, "pki", "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	ms2, err := capi.Start(ctx, capi.Options{Kubeconfig: cp.KubeconfigPath(), Dir: dir, Log: os.Stderr})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ms2.Stop)
	if caAfter, _ := os.ReadFile(filepath.Join(dir, "pki", "ca.crt")); string(caAfter) != string(caBefore) {
		t.Error("a second Start made a new webhook CA")
	}
	if err := c.Create(ctx, kcp(ns, "invalid", 1, 0), client.DryRunAll); err == nil || !strings.Contains(err.Error(), "denied the request") {
		t.Errorf("after a restart, maxSurge 0 with one replica: err = %v, want KCP's webhook to deny it", err)
	}
	second := &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fleet-2"},
		Spec: clusterv1.ClusterSpec{ControlPlaneRef: clusterv1.ContractVersionedObjectReference{
			APIGroup: controlplanev1.GroupVersion.Group, Kind: "KubeadmControlPlane", Name: "fleet-2",
		}},
	}
	if err := c.Create(ctx, second); err != nil {
		t.Fatal(err)
	}
	poll("the restarted core manager's finalizer on a new Cluster", func() string {
		got := &clusterv1.Cluster{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(second), got); err != nil {
			return err.Error()
		}
		if !slices.Contains(got.Finalizers, clusterv1.ClusterFinalizer) {
			return fmt.Sprintf("finalizers %v", got.Finalizers)
		}
		return ""
	})
}

// kcp returns a KubeadmControlPlane with every default set explicitly,
// cloning machines from the FixtureMachineTemplate of the same name.
func kcp(ns, name string, replicas int32, maxSurge int) *controlplanev1.KubeadmControlPlane {
	return &controlplanev1.KubeadmControlPlane{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: controlplanev1.KubeadmControlPlaneSpec{
			Replicas: ptr.To(replicas),
			Version:  "v1.36.3",
			MachineTemplate: controlplanev1.KubeadmControlPlaneMachineTemplate{
				Spec: controlplanev1.KubeadmControlPlaneMachineTemplateSpec{
					InfrastructureRef: clusterv1.ContractVersionedObjectReference{
						APIGroup: fixtureGroup, Kind: "FixtureMachineTemplate", Name: name,
					},
				},
			},
			Rollout: controlplanev1.KubeadmControlPlaneRolloutSpec{
				Strategy: controlplanev1.KubeadmControlPlaneRolloutStrategy{
					Type: controlplanev1.RollingUpdateStrategyType,
					RollingUpdate: controlplanev1.KubeadmControlPlaneRolloutStrategyRollingUpdate{
						MaxSurge: ptr.To(intstr.FromInt(maxSurge)),
					},
				},
			},
		},
	}
}

// logTail prints the end of a manager's log.
func logTail(t *testing.T, m *capi.Manager) {
	data, err := os.ReadFile(m.LogFile)
	if err != nil {
		t.Logf("%s: %v", m.Name, err)
		return
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > 40 {
		lines = lines[len(lines)-40:]
	}
	t.Logf("%s (%s):\n%s", m.Name, m.LogFile, strings.Join(lines, "\n"))
}
