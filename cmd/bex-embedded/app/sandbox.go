package app

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"bex.co/bex/internal/sandbox"
)

// sandboxes are the platform's two sandbox managers: one for tenant apps
// (no way out of the machine unless --sandbox-outbound), one for builds,
// whose steps fetch dependencies from package registries beyond it. Both
// keep their containers from the host and from each other.
type sandboxes struct {
	apps, builds *sandbox.Manager
	// buildPATH is the PATH of build steps: the toolchains as a container
	// sees them.
	buildPATH string
	// appsOutbound says apps may connect beyond the machine.
	appsOutbound bool
}

func (s *sandboxes) close() {
	for _, m := range []*sandbox.Manager{s.apps, s.builds} {
		if m != nil {
			_ = m.Close()
		}
	}
}

// describe says where tenant code runs, for the ready summary.
func (s *sandboxes) describe() string {
	if s.apps == nil {
		return "none: --unsafe-no-sandbox, tenant code runs as this user"
	}
	out := "nothing beyond the machine"
	if s.appsOutbound {
		out = "out beyond the machine with --sandbox-outbound"
	}
	return fmt.Sprintf("runc; apps on %s (%s, %s), builds on %s (%s, out beyond the machine for package registries)",
		s.apps.Bridge(), s.apps.Subnet(), out, s.builds.Bridge(), s.builds.Subnet())
}

// sandboxes starts the managers, none with --unsafe-no-sandbox. Containers
// see, read-only, the Python installation that builds make virtualenvs
// from when it lies outside /usr; apps also the platform's binary directory
// (bex-static), builds the local wheel directories pip is pointed at.
func (o *Options) sandboxes(binDir string) (*sandboxes, error) {
	s := &sandboxes{appsOutbound: o.SandboxOutbound}
	if o.UnsafeNoSandbox {
		return s, nil
	}
	py := pythonPrefix()
	var appRO, buildRO []string
	s.buildPATH = "/usr/local/go/bin:/usr/local/bin:/usr/bin:/bin"
	if py != "" {
		appRO = append(appRO, py)
		buildRO = append(buildRO, py)
		s.buildPATH = filepath.Join(py, "bin") + ":" + s.buildPATH
	}
	if binDir != "" {
		appRO = append(appRO, binDir)
	}
	for _, p := range filepath.SplitList(strings.ReplaceAll(os.Getenv("PIP_FIND_LINKS"), " ", string(filepath.ListSeparator))) {
		if filepath.IsAbs(p) {
			buildRO = append(buildRO, p)
		}
	}
	var err error
	if s.apps, err = sandbox.New(sandbox.Options{Subnet: o.SandboxSubnet, StateDir: o.StateDir, ReadOnlyPaths: appRO, Outbound: o.SandboxOutbound}); err != nil {
		return nil, fmt.Errorf("starting the tenant sandboxes: %w", err)
	}
	// Builds keep nothing between runs: their uid ranges need no file.
	if s.builds, err = sandbox.New(sandbox.Options{Subnet: o.SandboxSubnet, ReadOnlyPaths: buildRO, Outbound: true}); err != nil {
		s.close()
		return nil, fmt.Errorf("starting the build sandboxes: %w", err)
	}
	return s, nil
}

// pythonPrefix is where the python3 on PATH is installed (its
// sys.base_prefix, a pyenv version say), "" when it is under /usr or
// missing.
func pythonPrefix() string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "python3", "-c", "import sys; print(sys.base_prefix)").Output()
	if err != nil {
		return ""
	}
	p := filepath.Clean(strings.TrimSpace(string(out)))
	if !filepath.IsAbs(p) || p == "/usr" || strings.HasPrefix(p, "/usr/") {
		return ""
	}
	return p
}
