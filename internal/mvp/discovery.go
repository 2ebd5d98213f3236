package mvp

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
)

const (
	// acceptMerged asks for /apis in aggregated discovery v2: peer-merged when
	// the server runs the proxy.
	acceptMerged = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
	// acceptNoPeer asks for the server's local view only.
	acceptNoPeer = acceptMerged + ";profile=nopeer"
)

// Resources is a set of group/version/resources with their verbs.
type Resources map[schema.GroupVersionResource][]string

// Discovery fetches /apis from the server cfg points at, in aggregated
// discovery v2: the server's own view when noPeer is set, else the view
// merged across peers. Subresources are left out.
func Discovery(ctx context.Context, cfg *rest.Config, noPeer bool) (Resources, error) {
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	accept := acceptMerged
	if noPeer {
		accept = acceptNoPeer
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(cfg.Host, "/")+"/apis", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", accept)
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetching discovery: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetching discovery: %s", resp.Status)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.Contains(ct, "apidiscovery.k8s.io") {
		return nil, fmt.Errorf("fetching discovery: server answered %q, not aggregated discovery v2", ct)
	}
	var list apidiscoveryv2.APIGroupDiscoveryList
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		return nil, fmt.Errorf("decoding discovery: %w", err)
	}
	out := Resources{}
	for _, g := range list.Items {
		for _, v := range g.Versions {
			for _, r := range v.Resources {
				verbs := slices.Clone(r.Verbs)
				slices.Sort(verbs)
				out[schema.GroupVersionResource{Group: g.Name, Version: v.Version, Resource: r.Resource}] = verbs
			}
		}
	}
	return out, nil
}

// Minus returns the resources in r that other lacks, sorted.
func (r Resources) Minus(other Resources) []schema.GroupVersionResource {
	var out []schema.GroupVersionResource
	for gvr := range r {
		if _, ok := other[gvr]; !ok {
			out = append(out, gvr)
		}
	}
	slices.SortFunc(out, func(a, b schema.GroupVersionResource) int { return strings.Compare(a.String(), b.String()) })
	return out
}

// Has reports whether r lists the given verb for gvr.
func (r Resources) Has(gvr schema.GroupVersionResource, verb string) bool {
	return slices.Contains(r[gvr], verb)
}

// ListPath returns the URL path that lists gvr across all namespaces.
func ListPath(gvr schema.GroupVersionResource) string { return Path(gvr, "", "") }

// Path returns the URL path of gvr in namespace (empty: cluster-wide or
// cluster-scoped), and of the object name when name is set.
func Path(gvr schema.GroupVersionResource, namespace, name string) string {
	p := "/apis/" + gvr.Group + "/" + gvr.Version
	if gvr.Group == "" {
		p = "/api/" + gvr.Version
	}
	if namespace != "" {
		p += "/namespaces/" + namespace
	}
	p += "/" + gvr.Resource
	if name != "" {
		p += "/" + name
	}
	return p
}
