package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"k8s.io/kube-openapi/pkg/spec3"

	"bex.co/bex/web/api/apiclient"
)

// TestOpenAPICoversEveryRoute checks that every route echo serves is in the
// document with its method, and that the document reads as OpenAPI 3 with
// every schema it references.
func TestOpenAPICoversEveryRoute(t *testing.T) {
	s := &Server{log: logr.Discard()}
	s.routes = s.routeTable()
	e := s.newEcho()

	raw, err := json.Marshal(s.OpenAPI())
	if err != nil {
		t.Fatal(err)
	}
	var doc spec3.OpenAPI
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("the document is not OpenAPI 3: %v", err)
	}
	if !strings.HasPrefix(doc.Version, "3.") || doc.Paths == nil {
		t.Fatalf("version %q, paths %v", doc.Version, doc.Paths)
	}

	if len(e.Routes()) != len(s.routes) {
		t.Errorf("echo has %d routes, the table %d", len(e.Routes()), len(s.routes))
	}
	for _, r := range e.Routes() {
		path := OpenAPIPath(r.Path)
		item, ok := doc.Paths.Paths[path]
		if !ok {
			t.Errorf("route %s %s: path %s is not in the document", r.Method, r.Path, path)
			continue
		}
		var op *spec3.Operation
		switch r.Method {
		case http.MethodGet:
			op = item.Get
		case http.MethodPost:
			op = item.Post
		case http.MethodPatch:
			op = item.Patch
		case http.MethodDelete:
			op = item.Delete
		case http.MethodPut:
			op = item.Put
		}
		if op == nil {
			t.Errorf("route %s %s: no %s operation in the document", r.Method, r.Path, r.Method)
			continue
		}
		if op.Summary == "" || op.Responses == nil {
			t.Errorf("route %s %s: operation without summary or responses", r.Method, r.Path)
		}
		for _, name := range strings.Split(strings.Trim(r.Path, "/"), "/") {
			if p, ok := strings.CutPrefix(name, ":"); ok && !hasParam(op, p) {
				t.Errorf("route %s %s: path parameter %s is not described", r.Method, r.Path, p)
			}
		}
	}

	// Every $ref names a schema of the document.
	for _, ref := range refs(string(raw)) {
		name := strings.TrimPrefix(ref, "#/components/schemas/")
		if _, ok := doc.Components.Schemas[name]; !ok {
			t.Errorf("$ref %s names no schema", ref)
		}
	}
	app := doc.Components.Schemas["App"]
	if app == nil || app.Properties["gitRemote"].Type[0] != "string" {
		t.Fatalf("schema App = %+v, want a gitRemote string", app)
	}
	for _, p := range []string{"placed", "placement", "cluster"} {
		if s, ok := app.Properties[p]; !ok || s.Type[0] != "string" {
			t.Errorf("schema App has no %s string", p)
		}
	}
	if !slices.Contains(app.Required, "placed") || slices.Contains(app.Required, "cluster") || slices.Contains(app.Required, "placement") {
		t.Errorf("schema App requires %v, want placed and neither cluster nor placement", app.Required)
	}
	// A release's kind is one of a fixed set, which the schema lists; the
	// rollback target is there for rollbacks only.
	for _, name := range []string{"Release", "ReleaseInfo"} {
		r := doc.Components.Schemas[name]
		if r == nil {
			t.Fatalf("no schema %s", name)
		}
		kind := r.Properties["kind"]
		if fmt.Sprint(kind.Enum) != fmt.Sprint([]string{apiclient.ReleaseKindDeploy, apiclient.ReleaseKindRollback, apiclient.ReleaseKindConfig}) ||
			!slices.Contains(r.Required, "kind") {
			t.Errorf("schema %s: kind enum %v, required %v; want a required string of deploy, rollback, config", name, kind.Enum, r.Required)
		}
		if to, ok := r.Properties["rollbackTo"]; !ok || to.Type[0] != "integer" || slices.Contains(r.Required, "rollbackTo") {
			t.Errorf("schema %s: rollbackTo %+v, want an optional integer", name, to)
		}
	}
}

func hasParam(op *spec3.Operation, name string) bool {
	for _, p := range op.Parameters {
		if p.Name == name && p.In == "path" && p.Required {
			return true
		}
	}
	return false
}

// refs returns the $ref values in a JSON text.
func refs(doc string) []string {
	var out []string
	for _, part := range strings.Split(doc, `"$ref":"`)[1:] {
		out = append(out, part[:strings.IndexByte(part, '"')])
	}
	return out
}
