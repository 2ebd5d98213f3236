package release

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"bex.co/bex/internal/lines"
	"bex.co/bex/internal/runtime"
	"bex.co/bex/internal/store"
)

// ReleaseProcess is the process type of the release phase: a Procfile's
// "release: <command>" runs once per release, before it takes traffic,
// never as instances.
const ReleaseProcess = "release"

// DefaultReleasePhaseTimeout bounds the release phase when Options do not
// say: an hour, as Heroku's.
const DefaultReleasePhaseTimeout = time.Hour

// releasePhaseLines is how many of its last lines a failed release phase's
// error quotes.
const releasePhaseLines = 10

// Run runs cmd in a fresh instance of the app's current release, with
// the release's image, environment (secrets read again) and the App's
// resources, as a web instance of it would run, without a port or
// traffic; it returns once the command has ended (see runtime.Runner).
// It holds the app's lock only when the release must be unpacked first:
// a run neither waits for a push nor holds one up. An app without a
// release is an error wrapping store.ErrConflict, a runtime that runs no
// one-off commands one wrapping runtime.ErrRunNotSupported; neither runs
// anything.
func (p *Releaser) Run(ctx context.Context, tenantName, appName string, cmd runtime.Command) (runtime.Exit, error) {
	r, ok := p.opts.Runtime.(runtime.Runner)
	if !ok {
		return runtime.Exit{}, runtime.ErrRunNotSupported
	}
	rel, err := p.current(ctx, tenantName, appName)
	if err != nil {
		return runtime.Exit{}, err
	}
	return r.Run(ctx, rel, cmd)
}

// current returns the app's current release as the runtime runs it.
func (p *Releaser) current(ctx context.Context, tenantName, appName string) (runtime.Release, error) {
	tenant, err := p.opts.Store.GetTenantByName(ctx, tenantName)
	if err != nil {
		return runtime.Release{}, fmt.Errorf("looking up tenant %s: %w", tenantName, err)
	}
	app, err := p.App(ctx, tenantName, appName)
	if err != nil {
		return runtime.Release{}, err
	}
	if app.Status.CurrentRelease == 0 {
		return runtime.Release{}, fmt.Errorf("%w: app %s has no release to run a command in yet: push to its git remote first", store.ErrConflict, appName)
	}
	if entries, err := os.ReadDir(p.releaseDir(app, int(app.Status.CurrentRelease))); err != nil || len(entries) == 0 {
		// Unpacked under the app's lock, as a rollout unpacks.
		unlock, err := p.Lock(ctx, tenantName, appName)
		if err != nil {
			return runtime.Release{}, err
		}
		defer unlock()
	}
	cur, err := p.opts.Store.GetRelease(ctx, tenant.ID, appName, int(app.Status.CurrentRelease))
	if err != nil {
		return runtime.Release{}, fmt.Errorf("release v%d: %w", app.Status.CurrentRelease, err)
	}
	rel, img, err := p.prepare(ctx, app, cur.Number, cur.Image, true)
	if err != nil {
		return runtime.Release{}, err
	}
	procs, _ := withoutRelease(processes(app, img))
	return p.complete(ctx, app, rel, procs, cur.Config)
}

// withoutRelease splits the release phase's command off procs: what runs
// as instances, and the command ("" when the release has none).
func withoutRelease(procs map[string]runtime.Process) (map[string]runtime.Process, string) {
	phase, ok := procs[ReleaseProcess]
	if !ok {
		return procs, ""
	}
	delete(procs, ReleaseProcess)
	return procs, phase.Command
}

// releasePhase runs command, the release's release process, in a fresh
// instance of rel, its output going to out as it comes; an error says
// why it failed (its exit status or why it was stopped, and its last
// lines): the release must not go out.
func (p *Releaser) releasePhase(ctx context.Context, rel runtime.Release, command string, out io.Writer) error {
	r, ok := p.opts.Runtime.(runtime.Runner)
	if !ok {
		return fmt.Errorf("the release phase (%s) cannot run: %w", command, runtime.ErrRunNotSupported)
	}
	timeout := p.opts.ReleasePhaseTimeout
	fmt.Fprintf(out, "-----> Running the release phase: %s\n", command)
	ctx, cancel := context.WithTimeoutCause(ctx, timeout, fmt.Errorf("timed out after %s", timeout))
	defer cancel()
	tail := newTailWriter(out, releasePhaseLines)
	exit, err := r.Run(ctx, rel, runtime.Command{
		Args: []string{"/bin/sh", "-c", command}, Name: ReleaseProcess,
		Attach: func(int) (runtime.Streams, error) { return runtime.Streams{Stdout: tail, Stderr: tail}, nil },
	})
	tail.Flush()
	switch {
	case errors.Is(err, runtime.ErrRunNotSupported):
		return fmt.Errorf("the release phase (%s) cannot run: %w", command, err)
	case err != nil:
		return fmt.Errorf("the release phase (%s) could not start: %w", command, err)
	case exit.Reason != "":
		return fmt.Errorf("the release phase (%s) was stopped, %s (exit status %d)%s", command, exit.Reason, exit.Code, tail.quote())
	case exit.Code != 0:
		return fmt.Errorf("the release phase (%s) exited with status %d%s", command, exit.Code, tail.quote())
	}
	fmt.Fprintf(out, "-----> Release phase done\n")
	return nil
}

// tailWriter writes each line of a process's output to out, indented as
// the push output indents, and keeps the last ones.
type tailWriter struct {
	lines.Writer
	mu   sync.Mutex
	last []string
}

func newTailWriter(out io.Writer, keep int) *tailWriter {
	w := &tailWriter{}
	w.Emit = func(line []byte, _ bool) {
		fmt.Fprintf(out, "       %s\n", line)
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.last = append(w.last, string(line)); len(w.last) > keep {
			w.last = w.last[len(w.last)-keep:]
		}
	}
	return w
}

// quote is the last lines, for an error: "; its last lines:\n  ...", or
// "" when there were none.
func (w *tailWriter) quote() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.last) == 0 {
		return "; it printed nothing"
	}
	return "; its last lines:\n  " + strings.Join(w.last, "\n  ")
}
