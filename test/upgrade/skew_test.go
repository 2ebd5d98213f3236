package upgrade

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"bex.co/bex/internal/controlplane"
	"bex.co/bex/internal/controlplane/cptest"
	"bex.co/bex/internal/mvp"
	"bex.co/bex/internal/upgrade/verify"
)

// servedSets maps each pinned version to what an apiserver of that version
// serves itself (its nopeer discovery), read from real servers.
type servedSets map[string]mvp.Resources

// discoverServed starts one unwired apiserver of each version on one etcd
// and reads each one's own discovery.
func discoverServed(t *testing.T, versions ...string) servedSets {
	t.Helper()
	var specs []controlplane.APIServerSpec
	for _, v := range versions {
		specs = append(specs, controlplane.APIServerSpec{Name: "discover-" + v, Version: v, NoMVP: true})
	}
	cp := cptest.StartWith(t, controlplane.Options{APIServers: specs})
	defer cp.Stop()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	out := servedSets{}
	for _, s := range cp.APIServers() {
		res, err := mvp.Discovery(ctx, s.RESTConfig(), true)
		if err != nil {
			t.Fatalf("reading the discovery of %s %s: %v", s.Name, s.Version, err)
		}
		out[s.Version] = res
	}
	return out
}

// newIn returns the listable resources version to serves and from does
// not: what a tenant may ask for that only upgraded apiservers serve.
func (s servedSets) newIn(from, to string) []schema.GroupVersionResource {
	var out []schema.GroupVersionResource
	for _, gvr := range s[to].Minus(s[from]) {
		if s[to].Has(gvr, verify.VerbList) {
			out = append(out, gvr)
		}
	}
	return out
}

func gvrStrings(g []schema.GroupVersionResource) []string {
	out := make([]string, len(g))
	for i, x := range g {
		out[i] = verify.GVRString(x)
	}
	return out
}
