package kubebin

import (
	"context"
	"os"
	"path/filepath"
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
		Traefik:            "github.com/traefik/traefik/v3",
		Helm:               "helm.sh/helm/v3",
		BuildKitd:          "github.com/moby/buildkit",
		BuildCtl:           "github.com/moby/buildkit",

		CAPIManager:                    CAPIModule,
		CAPIKubeadmBootstrapManager:    CAPIModule,
		CAPIKubeadmControlPlaneManager: CAPIModule,
	}
	if got := strings.Join(Tools(), ","); got != "pebble,pebble-challtestsrv,caddy,traefik,helm,buildkitd,buildctl,capi-manager,capi-kubeadm-bootstrap-manager,capi-kubeadm-control-plane-manager" {
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

// TestCAPIRecipePinsAPIModule: Cluster API's main module replaces its api
// module with ./api, which does not apply to a module depending on it, so the
// recipe must require the api module at the same version itself.
func TestCAPIRecipePinsAPIModule(t *testing.T) {
	for _, name := range []string{CAPIManager, CAPIKubeadmBootstrapManager, CAPIKubeadmControlPlaneManager} {
		var tl tool
		for _, x := range toolTable() {
			if x.name == name {
				tl = x
			}
		}
		r, err := loadRecipe(tl.recipe)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if want := "\t" + CAPIModule + "/api " + tl.version; !strings.Contains(string(r.files["go.mod"]), want) {
			t.Errorf("%s: recipe %s does not require%s", name, tl.recipe, want)
		}
		if !strings.Contains(tl.ldflags, "sigs.k8s.io/cluster-api/version.gitVersion="+tl.version) {
			t.Errorf("%s: ldflags %q do not stamp the version", name, tl.ldflags)
		}
	}
}

// TestToolModuleDir: the source of Cluster API at the managers' version is
// found through the recipe, with the CRDs and webhook manifests the managers
// are run with.
func TestToolModuleDir(t *testing.T) {
	b, err := NewBuilder(Options{CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	dir, err := b.ToolModuleDir(t.Context(), CAPIKubeadmControlPlaneManager, CAPIModule)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(dir, "@"+ToolVersion(CAPIKubeadmControlPlaneManager)) {
		t.Errorf("dir %s is not of version %s", dir, ToolVersion(CAPIKubeadmControlPlaneManager))
	}
	for _, f := range []string{
		"core/config/crd/bases/cluster.x-k8s.io_clusters.yaml",
		"controlplane/kubeadm/config/crd/bases/controlplane.cluster.x-k8s.io_kubeadmcontrolplanes.yaml",
		"bootstrap/kubeadm/config/webhook/manifests.yaml",
	} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	if _, err := b.ToolModuleDir(t.Context(), Helm, CAPIModule); err == nil || !strings.Contains(err.Error(), "does not require") {
		t.Errorf("a module the recipe does not require: err = %v", err)
	}
	if _, err := b.ToolModuleDir(t.Context(), "nginx", CAPIModule); err == nil || !strings.Contains(err.Error(), "unknown tool") {
		t.Errorf("an unknown tool: err = %v", err)
	}
}
