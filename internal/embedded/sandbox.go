package embedded

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"bex.co/bex/internal/sandbox"
)

// sandbox returns the tenant sandboxes' manager, or nil with
// --unsafe-no-sandbox. Containers see, read-only, the platform's binary
// directory (bex-static) and the Python installation that builds made
// their virtualenvs from, when it lies outside /usr.
func (o *Options) sandbox(binDir string) (*sandbox.Manager, error) {
	if o.UnsafeNoSandbox {
		return nil, nil
	}
	var ro []string
	if binDir != "" {
		ro = append(ro, binDir)
	}
	if p := pythonPrefix(); p != "" {
		ro = append(ro, p)
	}
	m, err := sandbox.New(sandbox.Options{
		Subnet:        o.SandboxSubnet,
		StateDir:      o.StateDir,
		ReadOnlyPaths: ro,
		Outbound:      o.SandboxOutbound,
	})
	if err != nil {
		return nil, fmt.Errorf("starting the tenant sandboxes: %w", err)
	}
	return m, nil
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
