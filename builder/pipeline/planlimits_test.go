package pipeline_test

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
	"bex.co/bex/internal/runtime/process"
	"bex.co/bex/internal/sandbox"
	"bex.co/bex/internal/sandbox/sandboxtest"
	"bex.co/bex/internal/store"
)

// planLimits are the cgroup limits of an instance of each plan
// (scheduler.PlanResources, enforced by the sandbox): its memory, its CPU
// as a CFS quota per 100 ms period, and the sandbox's pids limit, the same
// on every plan.
var planLimits = map[platformv1alpha1.Plan]sandboxtest.CgroupLimits{
	platformv1alpha1.PlanStarter:  {MemoryBytes: 512 << 20, CPU: "25000 100000", Pids: "256"},
	platformv1alpha1.PlanStandard: {MemoryBytes: 2 << 30, CPU: "100000 100000", Pids: "256"},
	platformv1alpha1.PlanPro:      {MemoryBytes: 4 << 30, CPU: "200000 100000", Pids: "256"},
}

// TestPlanChangeLimitsRunningInstances, on a real build, store and
// process runtime whose instances run in the sandbox: the instance of a
// push on the starter plan is held by its cgroup to starter's memory,
// CPU and pids; `bex scale --plan standard` (Releaser.Scale with a plan,
// as POST /scale calls it) replaces it with one held to standard's, and
// `bex scale web=2 --plan pro` with two held to pro's; a change of plan
// through the app's settings (Releaser.Update, as PATCH /apps/NAME
// calls it) replaces both with starter ones; a restart keeps the plan.
// Each change applies at once, with every request through the edge
// answered, no release recorded, the App's spec holding the plan and the
// tenant's count its CPU and memory.
func TestPlanChangeLimitsRunningInstances(t *testing.T) {
	sandboxtest.Require(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	e := newEnv(t)
	// The env's helpers (keepAsking, serving) ask e.rt: it is the
	// sandboxed driver from here on.
	plain := e.rt
	t.Cleanup(func() { _ = plain.Close() })
	sb := sandboxtest.New(t, sandbox.Options{StateDir: t.TempDir()})
	e.rt = process.New(process.Options{LogDir: filepath.Join(t.TempDir(), "logs"), Sandbox: sb})
	t.Cleanup(func() { _ = e.rt.Close() })
	p := e.pipelineWith(e.rt, "")
	tenantID := mustTenantID(t, e.st, e.tenant)

	// running checks that n instances run, none of those of before, each
	// held to plan's limits, and returns their pids.
	running := func(what string, n int, plan platformv1alpha1.Plan, before []int) []int {
		t.Helper()
		pids := e.rt.PIDs(e.tenant, e.name)
		if len(pids) != n {
			t.Fatalf("%s: the runtime runs %d instances (%v), want %d", what, len(pids), pids, n)
		}
		for _, pid := range pids {
			if slices.Contains(before, pid) {
				t.Errorf("%s: instance %d of before (%v) still runs; want every instance replaced", what, pid, before)
			}
			got, err := sandboxtest.ContainerLimits(pid)
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			if want := planLimits[plan]; got != want {
				t.Errorf("%s: instance %d is held to %+v, want %s's %+v", what, pid, got, plan, want)
			}
		}
		if got := e.app(t).Spec.Plan; got != plan {
			t.Errorf("%s: the App's plan is %q, want %s", what, got, plan)
		}
		if latest, err := e.st.LatestRelease(ctx, tenantID, e.name); err != nil || latest.Number != 1 || e.serving(t) != 1 {
			t.Errorf("%s: the latest release is v%d (%v), the runtime serves v%d; want v1, no release recorded", what, latest.Number, err, e.serving(t))
		}
		return pids
	}
	// counted checks the tenant's count of instances and what they request.
	counted := func(what string, want store.AppSize) {
		t.Helper()
		if got, err := e.st.TenantInstances(ctx, tenantID); err != nil || got != want {
			t.Errorf("%s: the tenant counts %+v, %v; want %+v", what, got, err, want)
		}
	}
	// answered runs change while asking the app through the edge, and
	// checks that every request was answered.
	answered := func(what string, change func() error) {
		t.Helper()
		stop := e.keepAsking()
		err := change()
		served, failures := stop()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if len(failures) > 0 || served == 0 {
			t.Errorf("%s: %d requests were answered and %d failed; the first: %q", what, served, len(failures), failures[:min(len(failures), 3)])
			return
		}
		t.Logf("%s: %d requests answered during the change, none failed", what, served)
	}

	if v1 := e.deploy(t, p, e.commitEnvApp(t)); v1 != 1 {
		t.Fatalf("first deploy made v%d", v1)
	}
	pids := running("v1 pushed on the default plan", 1, platformv1alpha1.PlanStarter, nil)
	counted("v1 on starter", store.AppSize{Instances: 1, MilliCPU: 250, MemoryBytes: 512 << 20})

	answered("bex scale --plan standard", func() error {
		n, procs, err := p.Scale(ctx, e.tenant, e.name, nil, string(platformv1alpha1.PlanStandard))
		if err == nil && (n != 1 || len(procs) != 1 || procs["web"] != 1) {
			t.Errorf("bex scale --plan standard: v%d %v; want v1 web=1", n, procs)
		}
		return err
	})
	pids = running("after bex scale --plan standard", 1, platformv1alpha1.PlanStandard, pids)
	counted("web=1 on standard", store.AppSize{Instances: 1, MilliCPU: 1000, MemoryBytes: 2 << 30})

	answered("bex scale web=2 --plan pro", func() error {
		n, procs, err := p.Scale(ctx, e.tenant, e.name, map[string]int{"web": 2}, string(platformv1alpha1.PlanPro))
		if err == nil && (n != 1 || len(procs) != 1 || procs["web"] != 2) {
			t.Errorf("bex scale web=2 --plan pro: v%d %v; want v1 web=2", n, procs)
		}
		return err
	})
	pids = running("after bex scale web=2 --plan pro", 2, platformv1alpha1.PlanPro, pids)
	counted("web=2 on pro", store.AppSize{Instances: 2, MilliCPU: 4000, MemoryBytes: 8 << 30})

	answered("PATCH /apps/web {plan: starter}", func() error {
		n, err := p.Update(ctx, e.tenant, e.name, func(a *platformv1alpha1.App) error {
			a.Spec.Plan = platformv1alpha1.PlanStarter
			return nil
		})
		if err == nil && n != 1 {
			t.Errorf("PATCH /apps/web {plan: starter}: v%d, want v1", n)
		}
		return err
	})
	pids = running("after PATCH /apps/web {plan: starter}", 2, platformv1alpha1.PlanStarter, pids)
	counted("web=2 on starter", store.AppSize{Instances: 2, MilliCPU: 500, MemoryBytes: 1 << 30})

	// The App keeps the plan: a restart runs it.
	if _, _, err := p.Restart(ctx, e.tenant, e.name, ""); err != nil {
		t.Fatal(err)
	}
	running("after a restart", 2, platformv1alpha1.PlanStarter, pids)
}
