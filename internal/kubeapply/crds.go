package kubeapply

import (
	"context"
	"fmt"
	"io/fs"
	"path"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"
)

// FieldManager is the name bex applies its objects under.
const FieldManager = "bex"

// InstallCRDs applies every *.yaml CustomResourceDefinition in fsys with
// server-side apply, then waits until each is Established and its group
// version is served. It returns the names of the CRDs.
func InstallCRDs(ctx context.Context, cfg *rest.Config, fsys fs.FS) ([]string, error) {
	client, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating apiextensions client: %w", err)
	}
	files, err := fs.Glob(fsys, "*.yaml")
	if err != nil {
		return nil, err
	}
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, f := range files {
		data, err := fs.ReadFile(fsys, f)
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", f, err)
		}
		for _, doc := range strings.Split(string(data), "\n---") {
			if strings.TrimSpace(doc) == "" {
				continue
			}
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := yaml.UnmarshalStrict([]byte(doc), crd); err != nil {
				return nil, fmt.Errorf("parsing %s: %w", path.Base(f), err)
			}
			crds = append(crds, crd)
		}
	}
	var names []string
	for _, crd := range crds {
		crd.APIVersion = "apiextensions.k8s.io/v1"
		crd.Kind = "CustomResourceDefinition"
		data, err := yaml.Marshal(crd)
		if err != nil {
			return nil, err
		}
		json, err := yaml.YAMLToJSON(data)
		if err != nil {
			return nil, err
		}
		force := true
		if _, err := client.ApiextensionsV1().CustomResourceDefinitions().Patch(ctx, crd.Name, types.ApplyPatchType, json,
			metav1.PatchOptions{FieldManager: FieldManager, Force: &force}); err != nil {
			return nil, fmt.Errorf("applying CRD %s: %w", crd.Name, err)
		}
		names = append(names, crd.Name)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	for _, crd := range crds {
		if err := waitServed(ctx, client, dc, crd); err != nil {
			return nil, err
		}
	}
	return names, nil
}

func waitServed(ctx context.Context, client apiextensionsclient.Interface, dc discovery.DiscoveryInterface, want *apiextensionsv1.CustomResourceDefinition) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		got, err := client.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, want.Name, metav1.GetOptions{})
		if err == nil && established(got) && served(dc, got) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for CRD %s to be established: %w", want.Name, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
			return true
		}
	}
	return false
}

func served(dc discovery.DiscoveryInterface, crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, v := range crd.Spec.Versions {
		if !v.Served {
			continue
		}
		list, err := dc.ServerResourcesForGroupVersion(crd.Spec.Group + "/" + v.Name)
		if err != nil {
			return false
		}
		found := false
		for _, r := range list.APIResources {
			if r.Name == crd.Spec.Names.Plural {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}
