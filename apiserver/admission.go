package apiserver

import (
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/klog/v2"

	"bex.co/bex/internal/kubeconfig"
)

// listedByPlugin is what an admission plugin of the generic apiserver lists
// from the management cluster before bex-apiserver becomes ready. A plugin
// whose resource that cluster does not serve would hold readiness forever:
// MutatingAdmissionPolicy on a 1.35 kube-apiserver, which has no
// admissionregistration.k8s.io/v1 mutatingadmissionpolicies.
type listedByPlugin struct {
	plugin   string
	resource schema.GroupVersionResource
}

func pluginsListingFromCluster() []listedByPlugin {
	return []listedByPlugin{
		{plugin: "MutatingAdmissionPolicy", resource: schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "mutatingadmissionpolicies"}},
	}
}

// disableUnservedAdmissionPlugins turns off, with a log line saying why,
// each such plugin whose resource the management cluster does not serve,
// unless --enable-admission-plugins names it.
func (o *Options) disableUnservedAdmissionPlugins() error {
	ro := o.RecommendedOptions
	if ro.CoreAPI == nil || ro.Admission == nil {
		return nil
	}
	cfg, err := kubeconfig.Load(ro.CoreAPI.CoreAPIKubeconfigPath, "management cluster")
	if err != nil {
		return err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return fmt.Errorf("creating a discovery client for the management cluster: %w", err)
	}
	served := map[schema.GroupVersion][]string{}
	for _, p := range pluginsListingFromCluster() {
		if slices.Contains(ro.Admission.EnablePlugins, p.plugin) || slices.Contains(ro.Admission.DisablePlugins, p.plugin) {
			continue
		}
		gv := p.resource.GroupVersion()
		names, ok := served[gv]
		if !ok {
			list, err := dc.ServerResourcesForGroupVersion(gv.String())
			if err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("reading whether the management cluster serves %s: %w", gv, err)
			}
			if list != nil {
				for _, r := range list.APIResources {
					names = append(names, r.Name)
				}
			}
			served[gv] = names
		}
		if slices.Contains(names, p.resource.Resource) {
			continue
		}
		klog.InfoS("Disabling an admission plugin: the management cluster does not serve the resource it lists",
			"plugin", p.plugin, "resource", p.resource.String())
		ro.Admission.DisablePlugins = append(ro.Admission.DisablePlugins, p.plugin)
	}
	return nil
}
