package buildpod

import (
	"context"
	"errors"
	"net/http"
	"time"

	"bex.co/bex/builder/build"
	"bex.co/bex/builder/buildagent"
	"bex.co/bex/internal/runtime"
	"bex.co/bex/internal/runtime/kube"
)

// Options say what a build's Pod runs.
type Options struct {
	// Driver makes the Pods, in the tenants' namespaces of its cluster.
	Driver *kube.Driver
	// Image is the builder image: the stacks' toolchains and
	// bex-build-agent on its PATH.
	Image string
	// Resources bound each build's Pod, and Disk what it writes (a
	// quantity; kube.BuildSpec.Disk).
	Resources runtime.Resources
	Disk      string
	// Timeout is each Pod's deadline: the builder's build timeout.
	Timeout time.Duration
	// IdleTimeout ends a Pod whose builder made no call for that long
	// (kube.BuildSpec.IdleTimeout); zero: kube.BuildAgentIdle.
	IdleTimeout time.Duration
}

// Remote returns the build.RemoteFunc that starts a Pod per build.
func Remote(opts Options) (build.RemoteFunc, error) {
	if opts.Driver == nil {
		return nil, errors.New("buildpod: Driver is nil")
	}
	if opts.Image == "" {
		return nil, errors.New("buildpod: the builder image is empty")
	}
	return func(ctx context.Context, tenant, app string) (build.RemoteAgent, error) {
		p, err := opts.Driver.StartBuild(ctx, kube.BuildSpec{
			Tenant: tenant, App: app, Image: opts.Image, Resources: opts.Resources, Disk: opts.Disk, Timeout: opts.Timeout,
			IdleTimeout: opts.IdleTimeout,
		})
		if err != nil {
			return nil, err
		}
		// Calls end with the build's context; a step may run for
		// minutes, so the client sets no timeout of its own.
		c := &buildagent.Client{URL: p.URL, Token: p.Token, Dir: p.Dir, HTTP: &http.Client{}}
		return &agent{Client: c, pod: p}, nil
	}, nil
}

// agent is a build Pod's agent.
type agent struct {
	*buildagent.Client
	pod *kube.BuildPod
}

// Close deletes the Pod and its Secret.
func (a *agent) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a.pod.Delete(ctx)
	return nil
}
