package apitest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"

	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
	bexruntime "bex.co/bex/internal/runtime"
	"bex.co/bex/internal/store"
)

// ConfigRelease is one call of Releaser.ReleaseConfig.
type ConfigRelease struct {
	Tenant, App, Description, Actor string
}

// Restart is one call of Releaser.Restart.
type Restart struct {
	Tenant, App, Process string
}

// SetProcesses sets the process types every release runs (web alone
// unless set).
func (r *Releaser) SetProcesses(names ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.processes = names
}

// FailRollouts makes ReleaseConfig and Restart fail with a
// *runtime.NotDeployedError of err, and record nothing; nil makes them
// succeed again.
func (r *Releaser) FailRollouts(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fail = err
}

// ReleaseConfig records a release of the latest release's image and
// config (the fake reads no App), described description; 0 when the app
// has no release.
func (r *Releaser) ReleaseConfig(ctx context.Context, tenant, app, description, actor string) (int, error) {
	r.mu.Lock()
	r.configs = append(r.configs, ConfigRelease{Tenant: tenant, App: app, Description: description, Actor: actor})
	fail := r.fail
	r.mu.Unlock()
	t, err := r.Store.GetTenantByName(ctx, tenant)
	if err != nil {
		return 0, err
	}
	latest, err := r.Store.LatestRelease(ctx, t.ID, app)
	if errors.Is(err, store.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if fail != nil {
		return 0, &bexruntime.NotDeployedError{Err: fmt.Errorf("release v%d did not go out, v%d keeps serving: %w", latest.Number+1, latest.Number, fail)}
	}
	rel, err := r.Store.CreateRelease(ctx, store.NewRelease{
		TenantID: t.ID, App: app, Kind: store.ReleaseKindConfig, BuildID: latest.BuildID, Image: latest.Image,
		Config: latest.Config, Description: description, CreatedBy: actor,
	})
	if err != nil {
		return 0, err
	}
	obj := &platformv1alpha1.App{}
	if err := r.Kube.Get(ctx, client.ObjectKey{Namespace: tenant, Name: app}, obj); err != nil {
		return 0, err
	}
	base := obj.DeepCopy()
	obj.Status.CurrentRelease = int64(rel.Number)
	if err := r.Kube.Status().Patch(ctx, obj, client.MergeFrom(base)); err != nil {
		return 0, err
	}
	return rel.Number, nil
}

// Restart answers the App's current release and the processes a restart
// of process restarts; a process no release runs is refused as the
// runtime's Releaser refuses it.
func (r *Releaser) Restart(ctx context.Context, tenant, app, process string) (int, []string, error) {
	r.mu.Lock()
	r.restarts = append(r.restarts, Restart{Tenant: tenant, App: app, Process: process})
	procs, fail := r.processes, r.fail
	r.mu.Unlock()
	if procs == nil {
		procs = []string{"web"}
	}
	obj := &platformv1alpha1.App{}
	if err := r.Kube.Get(ctx, client.ObjectKey{Namespace: tenant, Name: app}, obj); err != nil {
		return 0, nil, err
	}
	current := obj.Status.CurrentRelease
	switch {
	case current == 0:
		return 0, nil, fmt.Errorf("app %s has no release to restart yet", app)
	case process != "" && !slices.Contains(procs, process):
		return 0, nil, fmt.Errorf("%w process %q: release v%d of %s has %s", store.ErrInvalid, process, current, app, strings.Join(procs, ", "))
	case fail != nil:
		return 0, nil, &bexruntime.NotDeployedError{Err: fmt.Errorf("restarting v%d failed, the old instances keep running: %w", current, fail)}
	case process != "":
		procs = []string{process}
	}
	return int(current), procs, nil
}

// ConfigReleases returns the config releases asked for so far.
func (r *Releaser) ConfigReleases() []ConfigRelease {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]ConfigRelease(nil), r.configs...)
}

// Restarts returns the restarts asked for so far.
func (r *Releaser) Restarts() []Restart {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Restart(nil), r.restarts...)
}

// Scale sets the counts and the plan in the App's spec, as the runtime's
// Releaser does once the scale is out, and answers the App's current
// release; a process no release runs is refused as the runtime's Releaser
// refuses it, and a failed rollout changes nothing.
func (r *Releaser) Scale(ctx context.Context, tenant, app string, counts map[string]int, plan string) (int, map[string]int, error) {
	r.mu.Lock()
	procs, fail := r.processes, r.fail
	r.mu.Unlock()
	if procs == nil {
		procs = []string{"web"}
	}
	obj := &platformv1alpha1.App{}
	if err := r.Kube.Get(ctx, client.ObjectKey{Namespace: tenant, Name: app}, obj); err != nil {
		return 0, nil, err
	}
	current := int(obj.Status.CurrentRelease)
	for name := range counts {
		if current != 0 && !slices.Contains(procs, name) {
			return 0, nil, fmt.Errorf("%w process %s: release v%d of %s has %s", store.ErrInvalid, name, current, app, strings.Join(procs, ", "))
		}
	}
	if current != 0 && fail != nil {
		return 0, nil, &bexruntime.NotDeployedError{Err: fmt.Errorf("scaling v%d failed, what ran keeps running: %w", current, fail)}
	}
	base := obj.DeepCopy()
	if plan != "" {
		obj.Spec.Plan = platformv1alpha1.Plan(plan)
	}
	formation := map[string]int{}
	for name, n := range counts {
		i := slices.IndexFunc(obj.Spec.Processes, func(p platformv1alpha1.Process) bool { return p.Name == name })
		if i < 0 {
			obj.Spec.Processes = append(obj.Spec.Processes, platformv1alpha1.Process{Name: name})
			i = len(obj.Spec.Processes) - 1
		}
		c := int32(n)
		obj.Spec.Processes[i].Replicas = &c
	}
	for _, p := range obj.Spec.Processes {
		if p.Replicas != nil {
			formation[p.Name] = int(*p.Replicas)
		}
	}
	if err := r.Kube.Patch(ctx, obj, client.MergeFrom(base)); err != nil {
		return 0, nil, err
	}
	return current, formation, nil
}

// SetRunsTakeNoInput makes Run refuse a command that asks for input or a
// terminal, as a runtime that takes neither does, when set.
func (r *Releaser) SetRunsTakeNoInput(noInput bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.noInput = noInput
}

// SetRunsUnsupported makes Run answer as a runtime that runs no one-off
// commands when set.
func (r *Releaser) SetRunsUnsupported(unsupported bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.runsUnsupported = unsupported
}

// Run runs cmd for real, with Runner, in a release of RunDir numbered as
// the App's current release, whose environment is RUN_RELEASE (its
// number); an app without a release is refused as the runtime's Releaser
// refuses it.
func (r *Releaser) Run(ctx context.Context, tenant, app string, cmd bexruntime.Command) (bexruntime.Exit, error) {
	r.mu.Lock()
	unsupported, noInput := r.runsUnsupported, r.noInput
	r.mu.Unlock()
	if unsupported {
		return bexruntime.Exit{}, fmt.Errorf("cluster fleet-1: %w", bexruntime.ErrRunNotSupported)
	}
	if noInput && (cmd.Stdin || cmd.Terminal) {
		return bexruntime.Exit{}, fmt.Errorf("cluster fleet-1: %w", bexruntime.ErrNoInput)
	}
	obj := &platformv1alpha1.App{}
	if err := r.Kube.Get(ctx, client.ObjectKey{Namespace: tenant, Name: app}, obj); err != nil {
		return bexruntime.Exit{}, err
	}
	current := int(obj.Status.CurrentRelease)
	if current == 0 {
		return bexruntime.Exit{}, fmt.Errorf("%w: app %s has no release to run a command in yet", store.ErrConflict, app)
	}
	return r.Runner.Run(ctx, bexruntime.Release{
		Tenant: tenant, App: app, Number: current, Dir: r.RunDir,
		Env:       map[string]string{"RUN_RELEASE": strconv.Itoa(current)},
		Processes: map[string]bexruntime.Process{"web": {Command: "true", Replicas: 1}},
	}, cmd)
}

// Update applies change to the App's spec, as the runtime's Releaser does
// once what runs follows, and answers the App's current release; counts
// of a process no release runs are refused as the runtime's Releaser
// refuses them, and a failed rollout changes nothing. It runs nothing:
// maintenance on or off changes the spec alone.
func (r *Releaser) Update(ctx context.Context, tenant, app string, change func(*platformv1alpha1.App) error) (int, error) {
	r.mu.Lock()
	procs, fail := r.processes, r.fail
	r.mu.Unlock()
	if procs == nil {
		procs = []string{"web"}
	}
	obj := &platformv1alpha1.App{}
	if err := r.Kube.Get(ctx, client.ObjectKey{Namespace: tenant, Name: app}, obj); err != nil {
		return 0, err
	}
	want := obj.DeepCopy()
	if err := change(want); err != nil {
		return 0, err
	}
	current := int(obj.Status.CurrentRelease)
	if current != 0 {
		for _, p := range want.Spec.Processes {
			if !slices.Contains(procs, p.Name) {
				return 0, fmt.Errorf("%w process %s: release v%d of %s has %s", store.ErrInvalid, p.Name, current, app, strings.Join(procs, ", "))
			}
		}
		if fail != nil {
			return 0, &bexruntime.NotDeployedError{Err: fmt.Errorf("updating v%d failed, what ran keeps running: %w", current, fail)}
		}
	}
	if err := r.Kube.Patch(ctx, want, client.MergeFrom(obj)); err != nil {
		return 0, err
	}
	return current, nil
}
