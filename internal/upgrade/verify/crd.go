package verify

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	utilrand "k8s.io/apimachinery/pkg/util/rand"

	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
	"bex.co/bex/internal/mvp"
)

// ProbeLabel marks the objects the CRD probes create, so that any left
// behind (the verifier stopped between create and delete) can be found:
// kubectl delete apps -A -l bex.co/verify-probe=true.
const ProbeLabel = "bex.co/verify-probe"

// CRDProbe is a custom resource that every apiserver must serve itself.
type CRDProbe struct {
	Resource schema.GroupVersionResource
	Kind     string
	// Namespaced objects are created in Options.Namespace.
	Namespaced bool
	// Spec is the spec of the object created; it must be valid. Nil: none.
	Spec map[string]any
}

// AppProbe probes the platform's App CRD with the smallest valid App: an
// empty spec is defaulted by the CRD's schema, and suspended keeps an App
// controller from running anything for it.
func AppProbe() CRDProbe {
	return CRDProbe{
		Resource:   platformv1alpha1.GroupVersion.WithResource("apps"),
		Kind:       "App",
		Namespaced: true,
		Spec:       map[string]any{"suspended": true},
	}
}

// probeName returns the name of a probe object created on server: it is
// bex-verify-<server>-<random>, a DNS label of at most 40 characters (the
// App's limit).
func probeName(server string) string {
	const prefix, maxServer = "bex-verify-", 40 - len("bex-verify-") - len("-12345")
	var b strings.Builder
	for _, r := range strings.ToLower(server) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	name := b.String()
	if len(name) > maxServer {
		name = name[:maxServer]
	}
	name = strings.Trim(name, "-")
	if name == "" {
		name = "server"
	}
	return prefix + name + "-" + utilrand.String(5)
}

// probeCRD creates an object of c on the server, reads it, lists c and
// deletes the object. A CRD is never proxied, so each operation must
// succeed on the server itself. Get and delete run only after a create
// that succeeded; delete runs even when get failed.
func (s *server) probeCRD(ctx context.Context, c CRDProbe, namespace string) []Probe {
	if !c.Namespaced {
		namespace = ""
	}
	name := probeName(s.Name)
	obj := map[string]any{
		"apiVersion": c.Resource.GroupVersion().String(),
		"kind":       c.Kind,
		"metadata":   map[string]any{"name": name, "labels": map[string]any{ProbeLabel: "true"}},
	}
	if c.Spec != nil {
		obj["spec"] = c.Spec
	}
	body, err := json.Marshal(obj)
	if err != nil {
		return []Probe{{APIServer: s.Name, Resource: c.Resource, Verb: VerbCreate, Outcome: Error, Message: err.Error()}}
	}
	var out []Probe
	create, _ := s.request(ctx, c.Resource, VerbCreate, http.MethodPost, mvp.Path(c.Resource, namespace, ""), body)
	out = append(out, localOutcome(create))
	created := create.Outcome == "" && create.Status >= 200 && create.Status < 300
	if created {
		get, _ := s.request(ctx, c.Resource, VerbGet, http.MethodGet, mvp.Path(c.Resource, namespace, name), nil)
		out = append(out, localOutcome(get))
	}
	list, _ := s.request(ctx, c.Resource, VerbList, http.MethodGet, mvp.Path(c.Resource, namespace, "")+"?limit=1", nil)
	out = append(out, localOutcome(list))
	if created {
		del, _ := s.request(ctx, c.Resource, VerbDelete, http.MethodDelete, mvp.Path(c.Resource, namespace, name), nil)
		out = append(out, localOutcome(del))
	}
	return out
}
