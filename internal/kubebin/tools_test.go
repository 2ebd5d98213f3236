package kubebin

import (
	"context"
	"strings"
	"testing"
)

// TestToolRecipesMatchTable checks, without building, that every tool's
// recipe exists and pins the module version the table claims.
func TestToolRecipesMatchTable(t *testing.T) {
	modules := map[string]string{
		Pebble:             "github.com/letsencrypt/pebble/v2",
		PebbleChallTestSrv: "github.com/letsencrypt/pebble/v2",
		Caddy:              "github.com/caddyserver/caddy/v2",
		Helm:               "helm.sh/helm/v3",
		BuildKitd:          "github.com/moby/buildkit",
		BuildCtl:           "github.com/moby/buildkit",
	}
	if got := strings.Join(Tools(), ","); got != "pebble,pebble-challtestsrv,caddy,helm,buildkitd,buildctl" {
		t.Fatalf("Tools() = %s", got)
	}
	for _, tl := range toolTable() {
		r, err := loadRecipe(tl.recipe)
		if err != nil {
			t.Fatalf("%s: %v", tl.name, err)
		}
		if len(r.files["go.sum"]) == 0 {
			t.Errorf("%s: recipe %s has no go.sum", tl.name, tl.recipe)
		}
		mod := string(r.files["go.mod"])
		if want := modules[tl.name] + " " + tl.version; !strings.Contains(mod, want) {
			t.Errorf("%s: recipe %s does not require %s", tl.name, tl.recipe, want)
		}
		if tl.pkg != "." && !strings.Contains(mod, "\t"+tl.pkg+"\n") {
			t.Errorf("%s: recipe %s has no tool directive for %s", tl.name, tl.recipe, tl.pkg)
		}
		if ToolVersion(tl.name) != tl.version {
			t.Errorf("ToolVersion(%s) = %q, want %q", tl.name, ToolVersion(tl.name), tl.version)
		}
	}
}

func TestUnknownTool(t *testing.T) {
	b, err := NewBuilder(Options{CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Tool(context.Background(), "nginx"); err == nil || !strings.Contains(err.Error(), "unknown tool") {
		t.Fatalf("err = %v, want unknown tool", err)
	}
	if ToolVersion("nginx") != "" {
		t.Fatal("ToolVersion of an unknown tool is not empty")
	}
}
