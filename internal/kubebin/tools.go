package kubebin

import (
	"context"
	"fmt"
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
	// Helm is the Helm 3 CLI, to lint and render deploy/chart/bex in tests.
	Helm = "helm"
	// BuildKitd is BuildKit's daemon, which builds Dockerfile apps with
	// runc as its OCI worker.
	BuildKitd = "buildkitd"
	// BuildCtl is BuildKit's client, which the builder runs to hand
	// buildkitd a Dockerfile build.
	BuildCtl = "buildctl"
)

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
func toolTable() []tool {
	return []tool{
		{name: Pebble, recipe: "pebble-v2.10.3", version: "v2.10.3", pkg: "github.com/letsencrypt/pebble/v2/cmd/pebble", estimate: "about a minute"},
		{name: PebbleChallTestSrv, recipe: "pebble-v2.10.3", version: "v2.10.3", pkg: "github.com/letsencrypt/pebble/v2/cmd/pebble-challtestsrv", estimate: "under a minute"},
		{name: Caddy, recipe: "caddy-v2.11.9", version: "v2.11.9", pkg: ".", estimate: "about 8 minutes"},
		{name: Helm, recipe: "helm-v3.22.0", version: "v3.22.0", pkg: "helm.sh/helm/v3/cmd/helm", estimate: "about 4 minutes"},
		{name: BuildKitd, recipe: "buildkit-v0.34.2", version: "v0.34.2", pkg: "github.com/moby/buildkit/cmd/buildkitd", estimate: "about 6 minutes", ldflags: buildkitVersion("v0.34.2")},
		{name: BuildCtl, recipe: "buildkit-v0.34.2", version: "v0.34.2", pkg: "github.com/moby/buildkit/cmd/buildctl", estimate: "about a minute after buildkitd", ldflags: buildkitVersion("v0.34.2")},
	}
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

// Tool returns the path of the named tool (one of Tools) at its pinned
// version, building it first when the cache lacks it.
func (b *Builder) Tool(ctx context.Context, name string) (string, error) {
	for _, t := range toolTable() {
		if t.name != name {
			continue
		}
		r, err := loadRecipe(t.recipe)
		if err != nil {
			return "", fmt.Errorf("loading recipe %s: %w", t.recipe, err)
		}
		r.name, r.version, r.pkg, r.estimate = t.name, t.version, t.pkg, t.estimate
		r.ldflags = strings.TrimSpace("-s -w " + t.ldflags)
		return b.build(ctx, r)
	}
	return "", fmt.Errorf("unknown tool %q (known: %s)", name, strings.Join(Tools(), ", "))
}
