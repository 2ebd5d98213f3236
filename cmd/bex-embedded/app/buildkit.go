package app

import (
	"context"
	"fmt"
	"io"
	"path/filepath"

	"bex.co/bex/builder/build"
	"bex.co/bex/internal/buildkitd"
	"bex.co/bex/internal/kubebin"
)

// startBuildKit starts buildkitd for Dockerfile builds, as root with runc as
// its worker, its state and its socket (mode 0600) in <state>/buildkit, and
// returns the builder options that point at it. Where the machine lacks
// what buildkitd needs (root, runc), it starts nothing and the options
// carry the reason, so that a Dockerfile push fails saying what is missing;
// the rest of the platform runs. The pinned buildkitd and buildctl are
// built first when the cache lacks them.
func (o *Options) startBuildKit(ctx context.Context, out io.Writer, stops *closers) (build.Options, error) {
	if reason := buildkitd.Missing(""); reason != "" {
		fmt.Fprintf(out, "bex: Dockerfile builds are off: %s\n", reason)
		return build.Options{NoBuildKitReason: reason}, nil
	}
	bins, err := kubebin.NewBuilder(kubebin.Options{Progress: prefixed(out, "buildkit: ")})
	if err != nil {
		return build.Options{}, err
	}
	bin, err := bins.Tool(ctx, kubebin.BuildKitd)
	if err != nil {
		return build.Options{}, fmt.Errorf("building buildkitd: %w", err)
	}
	ctl, err := bins.Tool(ctx, kubebin.BuildCtl)
	if err != nil {
		return build.Options{}, fmt.Errorf("building buildctl: %w", err)
	}
	d, err := buildkitd.Start(ctx, buildkitd.Options{Dir: filepath.Join(o.StateDir, "buildkit"), BuildKitd: bin})
	if err != nil {
		return build.Options{}, err
	}
	stops.push(d.Stop)
	fmt.Fprintf(out, "bex: buildkitd %s (runc worker) on %s, log %s\n", kubebin.ToolVersion(kubebin.BuildKitd), d.Addr(), d.Log())
	return build.Options{BuildKitAddr: d.Addr(), BuildCtl: ctl, BuildKitLimits: true}, nil
}
