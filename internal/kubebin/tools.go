package kubebin

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// Names of the tools Tool builds.
const (
	// Pebble is Let's Encrypt's ACME test server.
	Pebble = "pebble"
	// PebbleChallTestSrv is pebble's mock DNS server, with an HTTP API to set
	// records.
	PebbleChallTestSrv = "pebble-challtestsrv"
	// Caddy is the Caddy web server with its standard modules, for benchmarks.
	Caddy = "caddy"
	// Traefik is the Traefik proxy, which Kubernetes-native platforms ship
	// as their ingress, for benchmarks.
	Traefik = "traefik"
	// Helm is the Helm 3 CLI, to lint and render deploy/chart/bex in tests.
	Helm = "helm"
	// BuildKitd is BuildKit's daemon, which builds Dockerfile apps with
	// runc as its OCI worker.
	BuildKitd = "buildkitd"
	// BuildCtl is BuildKit's client, which the builder runs to hand
	// buildkitd a Dockerfile build.
	BuildCtl = "buildctl"
	// CAPIManager is Cluster API's core manager: the Cluster, Machine,
	// MachineSet and MachineDeployment controllers and their webhooks.
	CAPIManager = "capi-manager"
	// CAPIKubeadmBootstrapManager is Cluster API's kubeadm bootstrap
	// provider (CABPK), which turns KubeadmConfigs into bootstrap data.
	CAPIKubeadmBootstrapManager = "capi-kubeadm-bootstrap-manager"
	// CAPIKubeadmControlPlaneManager is Cluster API's KubeadmControlPlane
	// controller (KCP), which creates, rolls and deletes control-plane
	// Machines.
	CAPIKubeadmControlPlaneManager = "capi-kubeadm-control-plane-manager"
)

// CAPIModule is the module whose source holds the Cluster API managers' CRDs
// and webhook manifests (see Builder.ToolModuleDir).
const CAPIModule = "sigs.k8s.io/cluster-api"

// tool is one row of the tools table: which recipe builds a binary, and what
// to build in it.
type tool struct {
	name     string
	recipe   string // directory under recipes/
	version  string
	pkg      string // package built in the recipe's module
	estimate string // how long a first build takes on 2 cores
	ldflags  string // stamped on top of "-s -w"
}

// toolTable lists the tools Tool can build. Both pebble binaries come from one
// recipe whose go.mod names them with tool directives; helm's recipe names
// helm.sh/helm/v3/cmd/helm the same way, and BuildKit's names buildkitd and
// buildctl (github.com/moby/buildkit has no replace directives to repeat).
// Traefik's recipe names cmd/traefik and repeats the replace directives of
// Traefik's go.mod (its forks of go-http-auth, mux and minheap) and its
// exclude, which apply only in Traefik's own module.
// Cluster API's recipe names its three managers; it requires
// sigs.k8s.io/cluster-api/api at the same version, since the main module's
// replace of ./api does not apply to a module that depends on it, and it pins
// k8s.io v0.36 and controller-runtime v0.24 of its own, not bex's.
func toolTable() []tool {
	return []tool{
		{name: Pebble, recipe: "pebble-v2.10.3", version: "v2.10.3", pkg: "github.com/letsencrypt/pebble/v2/cmd/pebble", estimate: "about a minute"},
		{name: PebbleChallTestSrv, recipe: "pebble-v2.10.3", version: "v2.10.3", pkg: "github.com/letsencrypt/pebble/v2/cmd/pebble-challtestsrv", estimate: "under a minute"},
		{name: Caddy, recipe: "caddy-v2.11.9", version: "v2.11.9", pkg: ".", estimate: "about 8 minutes"},
		{name: Traefik, recipe: "traefik-v3.6.12", version: "v3.6.12", pkg: "github.com/traefik/traefik/v3/cmd/traefik", estimate: "about 15 minutes", ldflags: traefikVersion("v3.6.12")},
		{name: Helm, recipe: "helm-v3.22.0", version: "v3.22.0", pkg: "helm.sh/helm/v3/cmd/helm", estimate: "about 4 minutes"},
		{name: BuildKitd, recipe: "buildkit-v0.34.2", version: "v0.34.2", pkg: "github.com/moby/buildkit/cmd/buildkitd", estimate: "about 6 minutes", ldflags: buildkitVersion("v0.34.2")},
		{name: BuildCtl, recipe: "buildkit-v0.34.2", version: "v0.34.2", pkg: "github.com/moby/buildkit/cmd/buildctl", estimate: "about a minute after buildkitd", ldflags: buildkitVersion("v0.34.2")},
		{name: CAPIManager, recipe: "cluster-api-v1.14.2", version: "v1.14.2", pkg: "sigs.k8s.io/cluster-api/core", estimate: "about 3 minutes", ldflags: capiVersion("v1.14.2")},
		{name: CAPIKubeadmBootstrapManager, recipe: "cluster-api-v1.14.2", version: "v1.14.2", pkg: "sigs.k8s.io/cluster-api/bootstrap/kubeadm", estimate: "under a minute after another Cluster API manager", ldflags: capiVersion("v1.14.2")},
		{name: CAPIKubeadmControlPlaneManager, recipe: "cluster-api-v1.14.2", version: "v1.14.2", pkg: "sigs.k8s.io/cluster-api/controlplane/kubeadm", estimate: "under a minute after another Cluster API manager", ldflags: capiVersion("v1.14.2")},
	}
}

// capiVersion stamps Cluster API's version, which each manager logs at start.
func capiVersion(v string) string {
	return versionFlags("sigs.k8s.io/cluster-api/version", v)
}

// traefikVersion stamps Traefik's version, which traefik version reports.
func traefikVersion(v string) string {
	return "-X github.com/traefik/traefik/v3/pkg/version.Version=" + v
}

// buildkitVersion stamps BuildKit's version, which buildkitd --version and
// buildctl debug info report.
func buildkitVersion(v string) string {
	return "-X github.com/moby/buildkit/version.Version=" + v
}

// Tools returns the names Tool accepts.
func Tools() []string {
	var out []string
	for _, t := range toolTable() {
		out = append(out, t.name)
	}
	return out
}

// ToolVersion returns the pinned version of the named tool, or "" when Tool
// does not know the name.
func ToolVersion(name string) string {
	for _, t := range toolTable() {
		if t.name == name {
			return t.version
		}
	}
	return ""
}

// lookupTool returns the named tool's row and its recipe.
func lookupTool(name string) (tool, *recipe, error) {
	for _, t := range toolTable() {
		if t.name != name {
			continue
		}
		r, err := loadRecipe(t.recipe)
		if err != nil {
			return tool{}, nil, fmt.Errorf("loading recipe %s: %w", t.recipe, err)
		}
		return t, r, nil
	}
	return tool{}, nil, fmt.Errorf("unknown tool %q (known: %s)", name, strings.Join(Tools(), ", "))
}

// Tool returns the path of the named tool (one of Tools) at its pinned
// version, building it first when the cache lacks it.
func (b *Builder) Tool(ctx context.Context, name string) (string, error) {
	t, r, err := lookupTool(name)
	if err != nil {
		return "", err
	}
	r.name, r.version, r.pkg, r.estimate = t.name, t.version, t.pkg, t.estimate
	r.ldflags = strings.TrimSpace("-s -w " + t.ldflags)
	return b.build(ctx, r)
}

// ToolModuleDir returns the directory in the Go module cache that holds the
// source of module (for example CAPIModule) at the named tool's pinned
// version, downloading it through the tool's recipe, whose go.sum checks it,
// when the cache lacks it. Callers read files the binary does not embed from
// there, such as Cluster API's CRDs and webhook manifests; they must not
// write to it.
func (b *Builder) ToolModuleDir(ctx context.Context, name, module string) (string, error) {
	t, r, err := lookupTool(name)
	if err != nil {
		return "", err
	}
	if !strings.Contains(string(r.files["go.mod"]), "\t"+module+" "+t.version) {
		return "", fmt.Errorf("recipe %s does not require %s %s", t.recipe, module, t.version)
	}
	dir, err := os.MkdirTemp("", "bex-kubebin-mod-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	if err := r.writeTo(dir); err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, b.goCmd, "mod", "download", "-json", module+"@"+t.version)
	cmd.Dir = dir
	cmd.Env = b.env()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("downloading %s %s: %w\n%s", module, t.version, err, stderr.String())
	}
	var m struct{ Dir, Error string }
	if err := json.Unmarshal(out, &m); err != nil {
		return "", fmt.Errorf("reading go mod download's answer: %w", err)
	}
	if m.Error != "" || m.Dir == "" {
		return "", fmt.Errorf("downloading %s %s: %s", module, t.version, m.Error)
	}
	return m.Dir, nil
}
