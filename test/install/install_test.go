package install

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	"sigs.k8s.io/yaml"

	"bex.co/bex/deploy/capi"
	capicrds "bex.co/bex/deploy/capi-crds"
	installcrds "bex.co/bex/deploy/install-crds"
	"bex.co/bex/internal/controlplane/cptest"
	"bex.co/bex/internal/kubeapply"
	"bex.co/bex/internal/kubebin"
	"bex.co/bex/internal/upgrade/preflight"
)

const (
	chartDir         = "../../deploy/chart/bex"
	releaseNamespace = "bex-system"
	fleetNamespace   = "fleet"
)

// templateVars are the clusterctl variables the templates are generated
// with, as an operator would set them.
func templateVars(kubeVersion string) map[string]string {
	return map[string]string{
		"CLUSTER_NAME":                      "mgmt",
		"NAMESPACE":                         fleetNamespace,
		"KUBERNETES_VERSION":                kubeVersion,
		"WORKER_MACHINE_COUNT":              "3",
		"HCLOUD_REGION":                     "fsn1",
		"HCLOUD_SSH_KEY":                    "ops",
		"HCLOUD_CONTROL_PLANE_MACHINE_TYPE": "cpx31",
		"HCLOUD_WORKER_MACHINE_TYPE":        "cpx41",
	}
}

// TestInstallArtifacts lints and renders the chart with its default and its
// production values, then dry-runs every rendered object and every object of
// the Hetzner cluster template server-side against a real kube-apiserver
// that has the CRDs they use, and runs the FleetUpgrade preflight on the
// template's KubeadmControlPlane (MVP wired) and on the stock one (each
// missing piece named).
func TestInstallArtifacts(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()

	helm := helmTool(ctx, t)

	renders := map[string][]byte{}
	for _, values := range []string{"", "values-production.yaml"} {
		name := "defaults"
		var extra []string
		if values != "" {
			name = values
			extra = []string{"-f", filepath.Join(chartDir, values)}
		}
		out, err := runHelm(ctx, helm, append([]string{"lint", "--strict", chartDir}, extra...)...)
		if err != nil {
			t.Fatalf("helm lint (%s): %v\n%s", name, err, out)
		}
		if bytes.Contains(out, []byte("[WARNING]")) || bytes.Contains(out, []byte("[ERROR]")) {
			t.Errorf("helm lint (%s) is not clean:\n%s", name, out)
		}
		args := append([]string{"template", "bex", chartDir, "--namespace", releaseNamespace,
			"--include-crds", "--kube-version", kubebin.DefaultKubeVersion}, extra...)
		out, err = runHelm(ctx, helm, args...)
		if err != nil {
			t.Fatalf("helm template (%s): %v\n%s", name, err, out)
		}
		renders[name] = out
	}

	cp := cptest.Start(t)
	cfg := cp.RESTConfig()
	for _, crds := range []fs.FS{capicrds.CRDs(), installcrds.CRDs()} {
		if _, err := kubeapply.InstallCRDs(ctx, cfg, crds); err != nil {
			t.Fatalf("installing CRDs: %v", err)
		}
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{releaseNamespace, fleetNamespace} {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating namespace %s: %v", ns, err)
		}
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dryRun := func(t *testing.T, source string, docs []byte, wantKinds ...string) {
		t.Helper()
		objs, err := decode(docs)
		if err != nil {
			t.Fatalf("%s: %v", source, err)
		}
		seen := map[string]bool{}
		for _, o := range objs {
			seen[o.GetKind()] = true
			if err := applyDryRun(ctx, dyn, mapper, o); err != nil {
				t.Errorf("%s: %s %s/%s: %v", source, o.GetKind(), o.GetNamespace(), o.GetName(), err)
			}
		}
		for _, k := range wantKinds {
			if !seen[k] {
				t.Errorf("%s renders no %s", source, k)
			}
		}
		t.Logf("%s: %d objects dry-run", source, len(objs))
	}

	t.Run("chart", func(t *testing.T) {
		common := []string{"CustomResourceDefinition", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding",
			"Deployment", "StatefulSet", "Service", "PersistentVolumeClaim", "PodDisruptionBudget", "NetworkPolicy", "APIService"}
		dryRun(t, "chart (defaults)", renders["defaults"], common...)
		dryRun(t, "chart (values-production.yaml)", renders["values-production.yaml"],
			append(common, "Certificate", "Issuer", "ServiceMonitor")...)
	})

	t.Run("cluster-template", func(t *testing.T) {
		for _, v := range []string{"v1.35.4", "v1.36.3", "v1.37.2"} {
			docs := substitute(t, "cluster-template.yaml", templateVars(v))
			dryRun(t, "cluster-template.yaml "+v, docs, "Cluster", "HetznerCluster", "KubeadmControlPlane",
				"HCloudMachineTemplate", "MachineHealthCheck", "MachineDeployment", "KubeadmConfigTemplate")

			kcp := kcpOf(t, docs)
			if kcp.Spec.Replicas == nil || *kcp.Spec.Replicas < 3 {
				t.Errorf("%s: replicas %v, want at least 3 with maxSurge 0", v, kcp.Spec.Replicas)
			}
			if ru := kcp.Spec.Rollout.Strategy.RollingUpdate.MaxSurge; ru == nil || ru.IntValue() != 0 {
				t.Errorf("%s: rollout maxSurge %v, want 0", v, ru)
			}
			wired, findings := preflight.MVPWired(kcp)
			if !wired {
				t.Errorf("%s: preflight says MVP is not wired: %s", v, describe(preflight.Blockers(findings)))
			}
			if b := preflight.Blockers(preflight.Run(ctx, preflight.Input{ControlPlane: kcp}, nil)); len(b) > 0 {
				t.Errorf("%s: preflight blockers: %s", v, describe(b))
			}
		}
	})

	// The Hetzner kinds are checked against test/install/caph/v1beta1's
	// schema: a mistake in the template's Hetzner objects is refused, not
	// waved through as an unknown kind's free-form fields would be.
	t.Run("hetzner-schema", func(t *testing.T) {
		objs, err := decode(substitute(t, "cluster-template.yaml", templateVars("v1.36.3")))
		if err != nil {
			t.Fatal(err)
		}
		find := func(kind string) *unstructured.Unstructured {
			for _, o := range objs {
				if o.GetKind() == kind {
					return o.DeepCopy()
				}
			}
			t.Fatalf("the template has no %s", kind)
			return nil
		}
		for _, tc := range []struct {
			name, kind string
			mutate     func(o *unstructured.Unstructured)
			want       string // in the apiserver's refusal
		}{
			{"misspelt field", "HetznerCluster", func(o *unstructured.Unstructured) {
				_ = unstructured.SetNestedField(o.Object, "lb11", "spec", "controlPlaneLoadBalancer", "size")
			}, "size"},
			{"unknown region", "HetznerCluster", func(o *unstructured.Unstructured) {
				_ = unstructured.SetNestedStringSlice(o.Object, []string{"fra1"}, "spec", "controlPlaneRegions")
			}, "fra1"},
			{"no token Secret", "HetznerCluster", func(o *unstructured.Unstructured) {
				unstructured.RemoveNestedField(o.Object, "spec", "hetznerSecretRef")
			}, "hetznerSecretRef"},
			{"unknown load balancer type", "HetznerCluster", func(o *unstructured.Unstructured) {
				_ = unstructured.SetNestedField(o.Object, "lb99", "spec", "controlPlaneLoadBalancer", "type")
			}, "lb99"},
			{"no server type", "HCloudMachineTemplate", func(o *unstructured.Unstructured) {
				unstructured.RemoveNestedField(o.Object, "spec", "template", "spec", "type")
			}, "type"},
		} {
			o := find(tc.kind)
			tc.mutate(o)
			err := applyDryRun(ctx, dyn, mapper, o)
			if err == nil {
				t.Errorf("%s: a %s with a %s passed the dry-run", tc.name, tc.kind, tc.name)
				continue
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: refusal does not name %q: %v", tc.name, tc.want, err)
			}
		}
	})

	t.Run("stock-kcp", func(t *testing.T) {
		for _, tc := range []struct {
			version string
			want    []string // reasons of the Blocker findings
		}{
			{"v1.35.4", []string{preflight.ReasonPeerCAFileMissing, preflight.ReasonFeatureGateOff}},
			{"v1.36.3", []string{preflight.ReasonPeerCAFileMissing}},
			{"v1.37.2", []string{preflight.ReasonPeerCAFileMissing}},
		} {
			docs := substitute(t, "stock-kcp.yaml", templateVars(tc.version))
			dryRun(t, "stock-kcp.yaml "+tc.version, docs, "KubeadmControlPlane")
			kcp := kcpOf(t, docs)
			wired, findings := preflight.MVPWired(kcp)
			if wired {
				t.Errorf("%s: preflight says the stock KubeadmControlPlane has MVP wired", tc.version)
			}
			var got []string
			for _, f := range preflight.Blockers(findings) {
				got = append(got, f.Reason)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("%s: blockers %v, want exactly %v:\n%s", tc.version, got, tc.want, describe(preflight.Blockers(findings)))
			}
			// The peer CA is the flag kubeadm never sets, and the finding
			// says so by name. The other files MVP needs are kubeadm's
			// defaults, which the preflight names as such.
			for _, f := range preflight.Blockers(findings) {
				if f.Reason == preflight.ReasonPeerCAFileMissing && !strings.Contains(f.Message, "--peer-ca-file") {
					t.Errorf("%s: the peer CA finding does not name --peer-ca-file: %s", tc.version, f.Message)
				}
			}
			for _, flag := range []string{"proxy-client-cert-file", "proxy-client-key-file", "requestheader-client-ca-file", "requestheader-allowed-names"} {
				if !slices.ContainsFunc(findings, func(f preflight.Finding) bool {
					return f.Reason == preflight.ReasonKubeadmDefault && strings.Contains(f.Message, "--"+flag+" ")
				}) {
					t.Errorf("%s: no finding names --%s as left to kubeadm's default", tc.version, flag)
				}
			}
		}
	})
}

// helmTool returns the pinned helm binary, built when missing.
func helmTool(ctx context.Context, t *testing.T) string {
	t.Helper()
	b, err := kubebin.NewBuilder(kubebin.Options{Progress: os.Stderr})
	if err != nil {
		t.Fatal(err)
	}
	helm, err := b.Tool(ctx, kubebin.Helm)
	if err != nil {
		t.Fatalf("building helm: %v", err)
	}
	return helm
}

func runHelm(ctx context.Context, helm string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, helm, args...)
	// A private home: no repositories or plugins of the user's leak in.
	home := os.TempDir()
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+filepath.Join(home, "bex-helm-cache"),
		"HELM_CONFIG_HOME="+filepath.Join(home, "bex-helm-config"), "HELM_DATA_HOME="+filepath.Join(home, "bex-helm-data"))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.Bytes(), err
}

// decode splits multi-document YAML into objects, skipping empty documents.
func decode(data []byte) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		var m map[string]any
		if err := yaml.Unmarshal(doc, &m); err != nil {
			return nil, fmt.Errorf("parsing a document: %w\n%s", err, doc)
		}
		if len(m) == 0 {
			continue
		}
		out = append(out, &unstructured.Unstructured{Object: m})
	}
}

// applyDryRun server-side applies o with dryRun=All: the apiserver runs
// defaulting, validation (OpenAPI, CEL) and admission, and stores nothing.
func applyDryRun(ctx context.Context, dyn dynamic.Interface, mapper meta.RESTMapper, o *unstructured.Unstructured) error {
	gvk := o.GroupVersionKind()
	m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return fmt.Errorf("no resource for %s: %w", gvk, err)
	}
	data, err := o.MarshalJSON()
	if err != nil {
		return err
	}
	var ri dynamic.ResourceInterface = dyn.Resource(m.Resource)
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		if o.GetNamespace() == "" {
			return errors.New("namespaced object without a namespace")
		}
		ri = dyn.Resource(m.Resource).Namespace(o.GetNamespace())
	}
	force := true
	_, err = ri.Patch(ctx, o.GetName(), types.ApplyPatchType, data, metav1.PatchOptions{
		DryRun: []string{metav1.DryRunAll}, FieldManager: kubeapply.FieldManager, Force: &force,
	})
	return err
}

var varRE = regexp.MustCompile(`\$\{([A-Z0-9_]+)(:=([^}]*))?\}`)

// substitute reads a template of deploy/capi/hetzner and replaces its
// clusterctl variables, ${VAR} and ${VAR:=default}, as clusterctl does. A
// variable with neither a value nor a default fails the test.
func substitute(t *testing.T, name string, vars map[string]string) []byte {
	t.Helper()
	data, err := fs.ReadFile(capi.Hetzner(), name)
	if err != nil {
		t.Fatal(err)
	}
	var missing []string
	out := varRE.ReplaceAllFunc(data, func(m []byte) []byte {
		sub := varRE.FindSubmatch(m)
		if v, ok := vars[string(sub[1])]; ok {
			return []byte(v)
		}
		if len(sub[2]) > 0 {
			return sub[3]
		}
		missing = append(missing, string(sub[1]))
		return m
	})
	if len(missing) > 0 {
		t.Fatalf("%s: variables without a value: %v", name, missing)
	}
	return out
}

func kcpOf(t *testing.T, docs []byte) *controlplanev1.KubeadmControlPlane {
	t.Helper()
	objs, err := decode(docs)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if o.GetKind() != "KubeadmControlPlane" {
			continue
		}
		data, err := o.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		kcp := &controlplanev1.KubeadmControlPlane{}
		if err := yaml.UnmarshalStrict(data, kcp); err != nil {
			t.Fatalf("decoding the KubeadmControlPlane: %v", err)
		}
		return kcp
	}
	t.Fatal("no KubeadmControlPlane")
	return nil
}

func describe(fs []preflight.Finding) string {
	var b strings.Builder
	for _, f := range fs {
		fmt.Fprintf(&b, "\n  %s/%s: %s", f.Check, f.Reason, f.Message)
	}
	return b.String()
}
