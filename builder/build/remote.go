package build

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"bex.co/bex/builder/buildagent"
	"bex.co/bex/internal/steptime"
	"bex.co/bex/internal/treetar"
)

// RemoteAgent is one build's agent, where Options.Remote placed its steps:
// a buildagent.Client, and what ends the place it runs in.
type RemoteAgent interface {
	// Paths are the build's directories as the steps see them.
	Paths() buildagent.Paths
	PutTree(ctx context.Context, tree io.Reader) error
	Run(ctx context.Context, cmd buildagent.Command, out io.Writer) error
	Tree(ctx context.Context) (io.ReadCloser, error)
	// Close ends the agent and what runs it (its Pod). It is called once
	// per agent, when the tree came back or the build failed.
	Close() error
}

// RemoteFunc starts the agent of one build of tenant's app. It returns once
// the agent answers, or with an error saying why it will not (its Pod was
// refused, its image cannot be pulled), before ctx's deadline.
type RemoteFunc func(ctx context.Context, tenant, app string) (RemoteAgent, error)

// remoteAgent starts the build's agent at its first step and sends it the
// checkout.
func (w *workspace) remoteAgent(ctx context.Context) (RemoteAgent, error) {
	if w.agent != nil {
		return w.agent, nil
	}
	stop := steptime.Start(ctx, "build pod")
	defer stop()
	a, err := w.remote(ctx, w.tenant, w.appName)
	if err != nil {
		return nil, fmt.Errorf("starting the build's agent: %w", err)
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(treetar.Write(pw, w.tree)) }()
	err = a.PutTree(ctx, pr)
	pr.Close()
	if err != nil {
		a.Close()
		return nil, err
	}
	w.agent = a
	w.stepApp = a.Paths().App
	return a, nil
}

// runRemote runs s in the build's agent.
func (w *workspace) runRemote(ctx context.Context, s step, out io.Writer) error {
	a, err := w.remoteAgent(ctx)
	if err != nil {
		return err
	}
	p := a.Paths()
	env := w.containerEnv(w.envAt(p.Home, p.Tmp, p.Cache, s.env), s)
	err = a.Run(ctx, buildagent.Command{Argv: s.argv, Env: env}, out)
	if ee := (*buildagent.ExitError)(nil); errors.As(err, &ee) {
		// As a command on the host ends: "exit status 2".
		return errors.New(ee.Status)
	}
	if err != nil && ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return err
}

// treeBack brings the tree the agent's steps left into the checkout, in
// place of what was there, and ends the agent. Nothing without one.
func (w *workspace) treeBack(ctx context.Context) error {
	a := w.agent
	if a == nil {
		return nil
	}
	w.agent = nil
	defer a.Close()
	stop := steptime.Start(ctx, "build pod")
	defer stop()
	rc, err := a.Tree(ctx)
	if err != nil {
		return err
	}
	defer rc.Close()
	if err := emptyRoot(w.tree); err != nil {
		return fmt.Errorf("emptying the checkout for the built tree: %w", err)
	}
	if err := treetar.Extract(rc, w.tree, treetar.Limits{Bytes: w.treeLimit}); err != nil {
		return fmt.Errorf("taking the built tree back from the build's agent: %w", err)
	}
	return nil
}

// endAgent ends an agent a failed build left.
func (w *workspace) endAgent() {
	if w.agent != nil {
		_ = w.agent.Close()
		w.agent = nil
	}
}

// emptyRoot removes everything under root, not root itself.
func emptyRoot(root *os.Root) error {
	f, err := root.Open(".")
	if err != nil {
		return err
	}
	names, err := f.Readdirnames(-1)
	f.Close()
	if err != nil {
		return err
	}
	for _, n := range names {
		if err := root.RemoveAll(n); err != nil {
			return err
		}
	}
	return nil
}
