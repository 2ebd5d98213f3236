package capi

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

	"bex.co/bex/internal/kubebin"
	"bex.co/bex/internal/pki"
)

// capiSource returns the cluster-api module's source at the managers'
// version (the Go module cache; no build).
func capiSource(t *testing.T) string {
	t.Helper()
	b, err := kubebin.NewBuilder(kubebin.Options{CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	src, err := b.ToolModuleDir(t.Context(), kubebin.CAPIManager, kubebin.CAPIModule)
	if err != nil {
		t.Fatal(err)
	}
	return src
}

// TestRenderCRDs: every manager's CRDs get their kustomization's labels (the
// contract label the core manager looks providers' CRDs up by) and a
// conversion webhook at the URL of the manager that serves the kind.
func TestRenderCRDs(t *testing.T) {
	src := capiSource(t)
	ca := []byte("ca")
	want := map[string]struct {
		crd, contract string
	}{
		"core":                 {"clusters.cluster.x-k8s.io", ""},
		"bootstrap/kubeadm":    {"kubeadmconfigs.bootstrap.cluster.x-k8s.io", "v1beta2"},
		"controlplane/kubeadm": {"kubeadmcontrolplanes.controlplane.cluster.x-k8s.io", "v1beta2"},
	}
	total := 0
	for _, c := range components() {
		url := "https://127.0.0.1:1/" + c.name + "/convert"
		crds, err := renderCRDs(filepath.Join(src, c.dir, "config", "crd"), url, ca)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		total += len(crds)
		found := false
		for _, crd := range crds {
			if crd.Spec.Conversion == nil || crd.Spec.Conversion.Webhook == nil || *crd.Spec.Conversion.Webhook.ClientConfig.URL != url {
				t.Errorf("%s: CRD %s has no conversion webhook at %s", c.name, crd.Name, url)
			}
			if crd.Name != want[c.dir].crd {
				continue
			}
			found = true
			if got := crd.Labels["cluster.x-k8s.io/v1beta2"]; got != want[c.dir].contract {
				t.Errorf("%s: contract label %q, want %q", crd.Name, got, want[c.dir].contract)
			}
		}
		if !found {
			t.Errorf("%s: no CRD %s", c.name, want[c.dir].crd)
		}
	}
	if total != 17 {
		t.Errorf("%d CRDs, want 17 (13 core, 2 bootstrap, 2 control plane)", total)
	}
}

// TestRenderWebhooks: every webhook calls its manager's port on 127.0.0.1
// with the CA, under clusterctl's names; none is left pointing at a Service.
func TestRenderWebhooks(t *testing.T) {
	src := capiSource(t)
	ca, err := pki.NewCA(pki.Spec{CommonName: "test", NotAfter: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range components() {
		m := &Manager{Name: c.name, WebhookPort: 20000 + i}
		objs, err := renderWebhooks(filepath.Join(src, c.dir, "config", "webhook", "manifests.yaml"), c.prefix, m, ca.CertPEM())
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		var configs []admissionregistrationv1.WebhookClientConfig
		var names []string
		for _, o := range objs {
			switch o := o.(type) {
			case *admissionregistrationv1.MutatingWebhookConfiguration:
				names = append(names, o.Name)
				for _, w := range o.Webhooks {
					configs = append(configs, w.ClientConfig)
				}
			case *admissionregistrationv1.ValidatingWebhookConfiguration:
				names = append(names, o.Name)
				for _, w := range o.Webhooks {
					configs = append(configs, w.ClientConfig)
				}
			}
		}
		if want := c.prefix + "mutating-webhook-configuration," + c.prefix + "validating-webhook-configuration"; strings.Join(names, ",") != want {
			t.Errorf("%s: configurations %v, want %s", c.name, names, want)
		}
		for _, cc := range configs {
			if cc.Service != nil || cc.URL == nil || !strings.HasPrefix(*cc.URL, m.WebhookURL("/")) || string(cc.CABundle) != string(ca.CertPEM()) {
				t.Errorf("%s: client config %+v is not a URL on port %d with the CA", c.name, cc, m.WebhookPort)
			}
		}
		if len(configs) == 0 {
			t.Errorf("%s: no webhooks", c.name)
		}
	}
}
