package capi

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"bex.co/bex/internal/kubeapply"
	"bex.co/bex/internal/pki"
)

// The webhook CA lives long; each serving certificate is issued anew on
// every Start.
const (
	caValidity      = 10 * 365 * 24 * time.Hour
	servingValidity = 365 * 24 * time.Hour
)

// loadOrCreateCA reads the webhook CA in dir, creating it when missing.
func loadOrCreateCA(dir string) (*pki.KeyPair, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating the pki directory: %w", err)
	}
	files := pki.Files{CertFile: filepath.Join(dir, "ca.crt"), KeyFile: filepath.Join(dir, "ca.key")}
	ca, err := files.Read()
	if err == nil && pki.ValidFor(ca.Cert, servingValidity) {
		return ca, nil
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("reading the webhook CA: %w", err)
	}
	ca, err = pki.NewCA(pki.Spec{
		CommonName:     "bex-capi-webhook-ca",
		NotAfter:       time.Now().Add(caValidity),
		MaxPathLenZero: true,
	})
	if err != nil {
		return nil, fmt.Errorf("making the webhook CA: %w", err)
	}
	if err := files.Write(ca); err != nil {
		return nil, fmt.Errorf("writing the webhook CA: %w", err)
	}
	return ca, nil
}

// issueServingCert writes a serving certificate for 127.0.0.1 and localhost,
// signed by ca, into dir as tls.crt and tls.key: the names the managers'
// --webhook-cert-name and --webhook-key-name default to.
func issueServingCert(ca *pki.KeyPair, dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("creating the serving certificate's directory: %w", err)
	}
	kp, err := ca.Issue(pki.Spec{
		CommonName:  "localhost",
		DNSNames:    []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		NotAfter:    time.Now().Add(servingValidity),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	if err != nil {
		return fmt.Errorf("issuing the webhook serving certificate: %w", err)
	}
	return pki.Files{CertFile: filepath.Join(dir, "tls.crt"), KeyFile: filepath.Join(dir, "tls.key")}.Write(kp)
}

// kustomization is what this package reads of a config/crd/kustomization.yaml:
// the CRD files, the labels added to each, and the patches (each of which
// turns on the conversion webhook of one CRD).
type kustomization struct {
	Resources []string `json:"resources"`
	Labels    []struct {
		Pairs map[string]string `json:"pairs"`
	} `json:"labels"`
	Patches []struct {
		Path string `json:"path"`
	} `json:"patches"`
	Configurations []string `json:"configurations"`
}

// installCRDs renders every manager's CRDs as its kustomization would, with
// the conversion webhook at the manager's URL, writes them under
// manifests/crds and installs them.
func installCRDs(ctx context.Context, cfg *rest.Config, src, manifests string, managers []*Manager, ca *pki.KeyPair) error {
	out := filepath.Join(manifests, "crds")
	if err := os.RemoveAll(out); err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o700); err != nil {
		return err
	}
	for i, c := range components() {
		crds, err := renderCRDs(filepath.Join(src, c.dir, "config", "crd"), managers[i].WebhookURL("/convert"), ca.CertPEM())
		if err != nil {
			return fmt.Errorf("rendering the CRDs of %s: %w", c.name, err)
		}
		for _, crd := range crds {
			data, err := yaml.Marshal(crd)
			if err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(out, crd.Name+".yaml"), data, 0o600); err != nil {
				return err
			}
		}
	}
	if _, err := kubeapply.InstallCRDs(ctx, cfg, os.DirFS(out)); err != nil {
		return fmt.Errorf("installing Cluster API's CRDs: %w", err)
	}
	return nil
}

// renderCRDs reads the kustomization in dir and returns its CRDs with its
// labels, and with a conversion webhook at convertURL, trusting caBundle,
// where a patch asks for one. A kustomization with anything else in it is
// refused, so that a new version that needs more is noticed.
func renderCRDs(dir, convertURL string, caBundle []byte) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	var k kustomization
	if err := readYAML(filepath.Join(dir, "kustomization.yaml"), &k); err != nil {
		return nil, err
	}
	labels := map[string]string{}
	for _, l := range k.Labels {
		for name, value := range l.Pairs {
			labels[name] = value
		}
	}
	conversion := map[string]bool{} // CRD name → has a conversion webhook
	for _, p := range k.Patches {
		var patch apiextensionsv1.CustomResourceDefinition
		if err := readYAML(filepath.Join(dir, p.Path), &patch); err != nil {
			return nil, err
		}
		if patch.Spec.Conversion == nil || patch.Spec.Conversion.Strategy != apiextensionsv1.WebhookConverter {
			return nil, fmt.Errorf("patch %s is not a conversion webhook", p.Path)
		}
		conversion[patch.Name] = true
	}
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, r := range k.Resources {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := readYAML(filepath.Join(dir, r), crd); err != nil {
			return nil, err
		}
		crd.APIVersion, crd.Kind = "apiextensions.k8s.io/v1", "CustomResourceDefinition"
		if crd.Labels == nil && len(labels) > 0 {
			crd.Labels = map[string]string{}
		}
		for name, value := range labels {
			crd.Labels[name] = value
		}
		if conversion[crd.Name] {
			url := convertURL
			crd.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{
				Strategy: apiextensionsv1.WebhookConverter,
				Webhook: &apiextensionsv1.WebhookConversion{
					ClientConfig:             &apiextensionsv1.WebhookClientConfig{URL: &url, CABundle: caBundle},
					ConversionReviewVersions: []string{"v1"},
				},
			}
			delete(conversion, crd.Name)
		}
		crds = append(crds, crd)
	}
	if len(conversion) > 0 {
		return nil, fmt.Errorf("conversion patches for CRDs the kustomization does not list: %v", conversion)
	}
	return crds, nil
}

// registerWebhooks renders every manager's config/webhook/manifests.yaml
// with its URL and the CA, writes them under manifests/webhooks and applies
// them.
func registerWebhooks(ctx context.Context, cfg *rest.Config, src, manifests string, managers []*Manager, ca *pki.KeyPair) error {
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("creating a client: %w", err)
	}
	out := filepath.Join(manifests, "webhooks")
	if err := os.MkdirAll(out, 0o700); err != nil {
		return err
	}
	force := true
	apply := metav1.PatchOptions{FieldManager: kubeapply.FieldManager, Force: &force}
	for i, c := range components() {
		objs, err := renderWebhooks(filepath.Join(src, c.dir, "config", "webhook", "manifests.yaml"), c.prefix, managers[i], ca.CertPEM())
		if err != nil {
			return fmt.Errorf("rendering the webhooks of %s: %w", c.name, err)
		}
		var docs []string
		for _, obj := range objs {
			data, err := yaml.Marshal(obj)
			if err != nil {
				return err
			}
			docs = append(docs, string(data))
			body, err := yaml.YAMLToJSON(data)
			if err != nil {
				return err
			}
			switch o := obj.(type) {
			case *admissionregistrationv1.MutatingWebhookConfiguration:
				_, err = client.AdmissionregistrationV1().MutatingWebhookConfigurations().Patch(ctx, o.Name, types.ApplyPatchType, body, apply)
			case *admissionregistrationv1.ValidatingWebhookConfiguration:
				_, err = client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Patch(ctx, o.Name, types.ApplyPatchType, body, apply)
			}
			if err != nil {
				return fmt.Errorf("applying the webhook configurations of %s: %w", c.name, err)
			}
		}
		if err := os.WriteFile(filepath.Join(out, c.name+".yaml"), []byte(strings.Join(docs, "---\n")), 0o600); err != nil {
			return err
		}
	}
	return nil
}

// renderWebhooks returns the webhook configurations in file, named with
// prefix, every clientConfig a URL on m's webhook server trusting caBundle.
func renderWebhooks(file, prefix string, m *Manager, caBundle []byte) ([]metav1.Object, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var objs []metav1.Object
	for _, doc := range strings.Split(string(data), "\n---") {
		if strings.TrimSpace(doc) == "" || strings.TrimSpace(doc) == "---" {
			continue
		}
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			return nil, fmt.Errorf("parsing %s: %w", file, err)
		}
		var obj metav1.Object
		var configs []*admissionregistrationv1.WebhookClientConfig
		switch meta.Kind {
		case "MutatingWebhookConfiguration":
			o := &admissionregistrationv1.MutatingWebhookConfiguration{}
			if err := yaml.UnmarshalStrict([]byte(doc), o); err != nil {
				return nil, fmt.Errorf("parsing %s: %w", file, err)
			}
			for i := range o.Webhooks {
				configs = append(configs, &o.Webhooks[i].ClientConfig)
			}
			obj = o
		case "ValidatingWebhookConfiguration":
			o := &admissionregistrationv1.ValidatingWebhookConfiguration{}
			if err := yaml.UnmarshalStrict([]byte(doc), o); err != nil {
				return nil, fmt.Errorf("parsing %s: %w", file, err)
			}
			for i := range o.Webhooks {
				configs = append(configs, &o.Webhooks[i].ClientConfig)
			}
			obj = o
		default:
			return nil, fmt.Errorf("%s holds a %s, not a webhook configuration", file, meta.Kind)
		}
		obj.SetName(prefix + obj.GetName())
		for _, cc := range configs {
			if cc.Service == nil || cc.Service.Path == nil {
				return nil, fmt.Errorf("a webhook of %s has no service path", file)
			}
			url := m.WebhookURL(*cc.Service.Path)
			*cc = admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: caBundle}
		}
		objs = append(objs, obj)
	}
	if len(objs) == 0 {
		return nil, fmt.Errorf("%s holds no webhook configuration", file)
	}
	return objs, nil
}

// readYAML reads file into v, refusing fields v does not have.
func readYAML(file string, v any) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	if err := yaml.UnmarshalStrict(data, v); err != nil {
		return fmt.Errorf("parsing %s: %w", file, err)
	}
	return nil
}
