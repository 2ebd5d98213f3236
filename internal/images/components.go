package images

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Base is the kind of image a component is laid on.
type Base int

const (
	// BaseStatic is for binaries that need no program besides themselves:
	// the minimal base (CA certificates, /etc/passwd with user 65532, /tmp)
	// or an image the caller names.
	BaseStatic Base = iota
	// BaseToolchain is for bex-git, which builds apps, and bex-build-agent,
	// the builder image of build Pods: git, the stacks' toolchains (go,
	// node and npm, python3), buildctl for Dockerfiles, and /bin/sh for
	// Procfile commands.
	BaseToolchain
)

// Needs says what a base of kind b must carry, for errors and help.
func (b Base) Needs() string {
	switch b {
	case BaseToolchain:
		return "git, go, node and npm, python3 and buildctl on PATH, and /bin/sh"
	}
	return "nothing but CA certificates"
}

// Component is one image of the chart.
type Component struct {
	// Name is the binary's, the cmd directory's and the image repository's
	// (the chart's default repository): bex-edge.
	Name string
	// Base is what the image is laid on.
	Base Base
}

// Package is the component's main package, relative to the module root.
func (c Component) Package() string { return "./cmd/" + c.Name }

// Binary is where the image holds the component's binary, its entrypoint.
func (c Component) Binary() string { return "/usr/local/bin/" + c.Name }

// Components are the chart's components, in the order the chart lists them.
func Components() []Component {
	return []Component{
		{Name: "bex-controller-manager", Base: BaseStatic},
		{Name: "bex-apiserver", Base: BaseStatic},
		{Name: "bex-web", Base: BaseStatic},
		{Name: "bex-git", Base: BaseToolchain},
		{Name: "bex-build-agent", Base: BaseToolchain},
		{Name: "bex-edge", Base: BaseStatic},
	}
}

// Names are the names of Components.
func Names() []string {
	var names []string
	for _, c := range Components() {
		names = append(names, c.Name)
	}
	return names
}

// Lookup returns the components of names, in the order given, each once; an
// unknown name is an error that lists the known ones.
func Lookup(names []string) ([]Component, error) {
	all := Components()
	var out []Component
	for _, n := range names {
		i := slices.IndexFunc(all, func(c Component) bool { return c.Name == n })
		if i < 0 {
			return nil, fmt.Errorf("unknown component %q (known: %s)", n, strings.Join(Names(), ", "))
		}
		if !slices.Contains(out, all[i]) {
			out = append(out, all[i])
		}
	}
	return out, nil
}

// ParsePlatform parses os/arch[/variant]. Only linux is built; arm takes
// variant v6 or v7 (GOARM), amd64 v1 to v4 (GOAMD64), arm64 v8 or none.
func ParsePlatform(s string) (v1.Platform, error) {
	p, err := v1.ParsePlatform(s)
	if err != nil {
		return v1.Platform{}, err
	}
	if p.OS != "linux" || p.Architecture == "" || strings.Count(s, "/") < 1 {
		return v1.Platform{}, errors.New("want linux/ARCH[/VARIANT], e.g. linux/amd64")
	}
	// Go's linux ports that compile without cgo and that container
	// runtimes run.
	goArch := []string{"amd64", "arm64", "arm", "386", "ppc64le", "s390x", "riscv64"}
	if !slices.Contains(goArch, p.Architecture) {
		return v1.Platform{}, fmt.Errorf("architecture %q is not built (known: %s)", p.Architecture, strings.Join(goArch, ", "))
	}
	if _, err := goEnv(*p); err != nil {
		return v1.Platform{}, err
	}
	return *p, nil
}

// goEnv is the go command's environment for p.
func goEnv(p v1.Platform) ([]string, error) {
	env := []string{"CGO_ENABLED=0", "GOOS=" + p.OS, "GOARCH=" + p.Architecture}
	switch {
	case p.Variant == "":
	case p.Architecture == "arm" && (p.Variant == "v6" || p.Variant == "v7"):
		env = append(env, "GOARM="+strings.TrimPrefix(p.Variant, "v"))
	case p.Architecture == "amd64" && slices.Contains([]string{"v1", "v2", "v3", "v4"}, p.Variant):
		env = append(env, "GOAMD64="+p.Variant)
	case p.Architecture == "arm64" && p.Variant == "v8":
	default:
		return nil, fmt.Errorf("variant %q of %s is not built", p.Variant, p.Architecture)
	}
	return env, nil
}
