package pipeline

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/klog/v2"

	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
	"bex.co/bex/builder/build"
	"bex.co/bex/builder/gitserver"
	"bex.co/bex/builder/release"
	appctrl "bex.co/bex/controllers/app"
	"bex.co/bex/internal/quota"
	"bex.co/bex/internal/steptime"
	"bex.co/bex/internal/store"
)

// Options configure a Pipeline.
type Options struct {
	// Releaser rolls built images out; its store records the builds.
	Releaser *release.Releaser
	Builder  *build.Builder
	// Quotas are the tenants' default quotas; a push beyond a tenant's
	// concurrent builds or build minutes is refused before its build is
	// recorded. nil means quota.NewDefaults().
	Quotas *quota.Defaults
	// Metrics receives the pipeline's metrics (bex_builds_total,
	// bex_build_duration_seconds, bex_push_duration_seconds, see
	// docs/metrics.md); nil counts them without serving them.
	Metrics prometheus.Registerer
	Log     logr.Logger
}

// Pipeline builds pushes into releases. It is a Releaser too: it rolls back
// and keeps releases running as the Releaser it was given does.
type Pipeline struct {
	*release.Releaser
	opts    Options
	metrics *metrics
}

var (
	_ gitserver.Deployer = (*Pipeline)(nil)
	_ appctrl.Releases   = (*Pipeline)(nil)
)

// New checks the options.
func New(opts Options) (*Pipeline, error) {
	switch {
	case opts.Releaser == nil:
		return nil, errors.New("pipeline: Releaser is nil")
	case opts.Builder == nil:
		return nil, errors.New("pipeline: Builder is nil")
	}
	if opts.Quotas == nil {
		opts.Quotas = quota.NewDefaults()
	} else if err := opts.Quotas.Validate(); err != nil {
		return nil, fmt.Errorf("pipeline: %w", err)
	}
	m, err := newMetrics(opts.Metrics)
	if err != nil {
		return nil, fmt.Errorf("pipeline: %w", err)
	}
	return &Pipeline{Releaser: opts.Releaser, opts: opts, metrics: m}, nil
}

// Deploy builds push.New, rolls it out and records the release.
func (p *Pipeline) Deploy(ctx context.Context, push gitserver.Push, log io.Writer) (gitserver.DeployResult, error) {
	start := time.Now()
	res, built, err := p.deploy(ctx, push, log)
	if built {
		outcome := OutcomeSucceeded
		if err != nil {
			outcome = OutcomeFailed
		}
		p.metrics.pushDuration.WithLabelValues(outcome).Observe(time.Since(start).Seconds())
	}
	return res, err
}

// deploy is Deploy; built says whether a build was recorded (a push
// refused before, by its quota or a missing app, is no push to time).
func (p *Pipeline) deploy(ctx context.Context, push gitserver.Push, log io.Writer) (_ gitserver.DeployResult, built bool, _ error) {
	// The git receiver's steps come first, in the timeline it gave.
	timeline := steptime.From(ctx)
	if timeline == nil {
		ctx, timeline = steptime.New(ctx)
	}
	stopPrepare := steptime.Start(ctx, "prepare")
	unlock, err := p.Lock(ctx, push.Tenant, push.App)
	if err != nil {
		return gitserver.DeployResult{}, false, err
	}
	defer unlock()
	tenant, err := p.Store().GetTenantByName(ctx, push.Tenant)
	if err != nil {
		return gitserver.DeployResult{}, false, fmt.Errorf("looking up tenant %s: %w", push.Tenant, err)
	}
	app, err := p.App(ctx, push.Tenant, push.App)
	if err != nil {
		return gitserver.DeployResult{}, false, err
	}
	bq, err := p.opts.Quotas.BuildQuota(ctx, p.Store(), tenant.ID, time.Now())
	if err != nil {
		return gitserver.DeployResult{}, false, fmt.Errorf("reading the quotas of tenant %s: %w", push.Tenant, err)
	}
	b, err := p.Store().CreateBuild(ctx, store.NewBuild{TenantID: tenant.ID, App: push.App, Commit: push.New, Stack: string(app.Spec.Build.Stack), Quota: bq})
	if errors.Is(err, store.ErrQuotaExceeded) {
		return gitserver.DeployResult{}, false, &gitserver.RefusedError{Reason: err}
	}
	if err != nil {
		return gitserver.DeployResult{}, false, fmt.Errorf("recording the build: %w", err)
	}
	stopPrepare()
	logs := newLogWriter(ctx, p.Store(), b.ID)
	out := io.MultiWriter(log, logs)
	// timings ends the push output and the build log with the steps' times.
	timings := func() []steptime.Step {
		steps := timeline.Steps()
		fmt.Fprintf(out, "-----> Timings: %s\n", steptime.Format(steps))
		return steps
	}
	fmt.Fprintf(out, "-----> Build %d of %s (%s)\n", b.Number, push.App, short(push.New))
	buildStart := time.Now()
	res, buildErr := p.opts.Builder.Build(ctx, build.Request{
		Tenant: push.Tenant, App: push.App, RepoDir: push.RepoDir, Commit: push.New,
		Stack: app.Spec.Build.Stack, Command: app.Spec.Build.Command, Dockerfile: app.Spec.Build.Dockerfile,
	}, out)
	p.countBuild(buildErr, res.Stack, app.Spec.Build.Stack, time.Since(buildStart))
	if buildErr != nil {
		t := timings()
		logs.Close()
		p.fail(app, b, store.BuildResult{Error: buildErr.Error(), Timings: t})
		return gitserver.DeployResult{}, true, buildErr
	}

	// Deleted at the next prune unless a release runs it by then: the
	// image of a release that fails, or that a kill cuts short, does not
	// stay in the registry for ever.
	if err := p.Store().QueueDeletion(ctx, tenant.ID, push.App, store.DeleteImage, res.Image, fmt.Sprintf("build %d was not released", b.Number)); err != nil {
		p.opts.Log.Error(err, "Recording a build's image for deletion unless released", "app", klog.KObj(app), "image", res.Image)
	}
	latest, err := p.LatestNumber(ctx, tenant.ID, push.App)
	if err != nil {
		logs.Close()
		p.fail(app, b, store.BuildResult{Stack: string(res.Stack), Error: err.Error()})
		return gitserver.DeployResult{}, true, err
	}
	config := release.ConfigOf(app)
	number := latest + 1
	fmt.Fprintf(out, "-----> Releasing v%d\n", number)
	description := "Deploy " + short(push.New)
	if err := p.Rollout(ctx, app, number, res.Image, config, out); err != nil {
		fmt.Fprintf(out, " !     Release v%d failed: %v\n", number, err)
		if recErr := p.RecordFailed(ctx, app, number, store.NewRelease{
			TenantID: tenant.ID, App: push.App, Kind: store.ReleaseKindDeploy, BuildID: b.ID, Image: res.Image,
			Config: config, Description: description, CreatedBy: push.Actor, Failure: err.Error(),
		}); recErr == nil {
			fmt.Fprintf(out, " !     v%d is recorded as failed (bex releases lists it); the previous release keeps serving\n", number)
		}
		t := timings()
		logs.Close()
		p.fail(app, b, store.BuildResult{Stack: string(res.Stack), Error: release.RolloutFailed(err), Timings: t})
		return gitserver.DeployResult{}, true, fmt.Errorf("release v%d failed, the previous release keeps serving: %w", number, err)
	}
	t := timings()
	logs.Close()
	p.finish(b.ID, store.BuildResult{Status: store.BuildSucceeded, Stack: string(res.Stack), Image: res.Image, Timings: t})
	rel, err := p.Store().CreateRelease(ctx, store.NewRelease{
		TenantID: tenant.ID, App: push.App, Kind: store.ReleaseKindDeploy, BuildID: b.ID, Image: res.Image,
		Config: config, Description: description, CreatedBy: push.Actor,
	})
	if err != nil {
		return gitserver.DeployResult{}, true, fmt.Errorf("recording release v%d: %w", number, err)
	}
	p.CountRelease(rel)
	url := p.URL(push.Tenant, push.App)
	if err := p.SetBuiltCurrent(ctx, app, b.Number, rel.Number, url); err != nil {
		return gitserver.DeployResult{}, true, err
	}
	p.Prune(ctx, tenant.ID, app, log)
	return gitserver.DeployResult{Release: rel.Number, URL: url}, true, nil
}

// finishPatience is how long finish waits for a database that is out of
// reach (restarting) before it leaves the build running.
const finishPatience = 2 * time.Minute

func (p *Pipeline) finish(buildID string, res store.BuildResult) {
	// The build's outcome is recorded even when the push was cancelled, and
	// through a database restart: a build left running would say so
	// forever.
	deadline := time.Now().Add(finishPatience)
	for wait := 250 * time.Millisecond; ; wait = min(2*wait, 5*time.Second) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := p.Store().FinishBuild(ctx, buildID, res)
		cancel()
		if err == nil {
			return
		}
		if !store.Unavailable(err) || time.Now().Add(wait).After(deadline) {
			p.opts.Log.Error(err, "Recording build result", "build", buildID)
			return
		}
		p.opts.Log.Info("Database unavailable; recording the build result again", "build", buildID, "in", wait)
		time.Sleep(wait)
	}
}

// fail records that build b of app failed with res (its Status set
// here): in the store (finish), then on the App (status.latestBuild), so
// that the App controller shows the failure at once.
func (p *Pipeline) fail(app *platformv1alpha1.App, b store.Build, res store.BuildResult) {
	res.Status = store.BuildFailed
	p.finish(b.ID, res)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.RecordBuild(ctx, app, b.Number); err != nil && !apierrors.IsNotFound(err) {
		p.opts.Log.Error(err, "Recording a failed build on its app", "app", klog.KObj(app), "build", b.Number)
	}
}

// countBuild counts a build the builder ran.
func (p *Pipeline) countBuild(err error, detected, asked platformv1alpha1.Stack, took time.Duration) {
	outcome := OutcomeSucceeded
	if err != nil {
		outcome = OutcomeFailed
	}
	p.metrics.builds.WithLabelValues(outcome, stackLabel(detected, asked)).Inc()
	p.metrics.buildDuration.WithLabelValues(outcome).Observe(took.Seconds())
}

func short(commit string) string {
	if len(commit) > 7 {
		return commit[:7]
	}
	return commit
}

// logWriter appends a build's output to the store line by line.
type logWriter struct {
	ctx     context.Context
	store   *store.Store
	buildID string
	pw      *io.PipeWriter
	done    chan struct{}
}

func newLogWriter(ctx context.Context, st *store.Store, buildID string) *logWriter {
	pr, pw := io.Pipe()
	w := &logWriter{ctx: context.WithoutCancel(ctx), store: st, buildID: buildID, pw: pw, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		// A line longer than the store keeps is cut there (the store says
		// so on the line) and the rest of it skipped, so that one long line
		// does not end the log.
		br := bufio.NewReaderSize(pr, 64<<10)
		for {
			line, err := readLine(br, store.MaxBuildLogLineBytes+1)
			if line != "" || err == nil {
				_ = st.AppendBuildLog(w.ctx, buildID, line)
			}
			if err != nil {
				break
			}
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	return w
}

// readLine reads one line from br, keeping at most max bytes of it and
// skipping the rest. The error is br's (io.EOF after a last line without a
// newline).
func readLine(br *bufio.Reader, max int) (string, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if room := max - len(line); room > 0 {
			line = append(line, chunk[:min(len(chunk), room)]...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return strings.TrimRight(string(line), "\r\n"), err
	}
}

func (w *logWriter) Write(b []byte) (int, error) { return w.pw.Write(b) }

// Close flushes the lines written so far into the store.
func (w *logWriter) Close() {
	w.pw.Close()
	<-w.done
}
