package store_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"bex.co/bex/internal/store"
)

func TestUpgradeRecords(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newStore(t)

	run, err := s.StartUpgradeRun(ctx, store.NewUpgradeRun{FleetUpgrade: "fleet/to-1-37", UID: "uid-1", TargetVersion: "v1.37.2"})
	if err != nil {
		t.Fatal(err)
	}
	if run.State != store.UpgradeRunning || run.FinishedAt != nil {
		t.Fatalf("new run = %+v", run)
	}
	// One run per FleetUpgrade object.
	again, err := s.StartUpgradeRun(ctx, store.NewUpgradeRun{FleetUpgrade: "fleet/to-1-37", UID: "uid-1", TargetVersion: "v1.37.2"})
	if err != nil || again.ID != run.ID {
		t.Fatalf("starting the same UID again = %+v, %v; want run %s", again, err, run.ID)
	}
	if _, err := s.StartUpgradeRun(ctx, store.NewUpgradeRun{FleetUpgrade: "x"}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("a run without UID and version: %v, want ErrInvalid", err)
	}

	// Steps get consecutive numbers, also when started at once.
	var wg sync.WaitGroup
	for i := range 5 {
		wg.Go(func() {
			if _, err := s.StartUpgradeStep(ctx, run.ID, store.NewUpgradeStep{Cluster: "fleet/c1", Kind: "machine", Machine: "cp-" + string(rune('a'+i))}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	steps, err := s.ListUpgradeSteps(ctx, run.ID)
	if err != nil || len(steps) != 5 {
		t.Fatalf("steps = %d, %v", len(steps), err)
	}
	for i, st := range steps {
		if st.Seq != i+1 || st.Outcome != store.StepRunning {
			t.Fatalf("step %d = %+v", i, st)
		}
	}
	if _, err := s.StartUpgradeStep(ctx, run.ID, store.NewUpgradeStep{Cluster: "fleet/c1", Kind: "dance"}); err == nil {
		t.Fatal("a step of an unknown kind was recorded")
	}

	at := time.Now().UTC().Truncate(time.Microsecond)
	samples := []store.ProbeSample{
		{APIServer: "cp-a", Resource: "resource.k8s.io/v1/devicetaintrules", Status: 404, Outcome: "Spurious404", Message: "404 page not found", At: at},
		{APIServer: "cp-b", Resource: "platform.bex.co/v1alpha1/apps", Verb: "create", Status: 201, Outcome: "ServedLocally", At: at.Add(time.Millisecond)},
		{APIServer: "cp-b", Resource: "resource.k8s.io/v1/devicetaintrules", Status: 404, Outcome: "Unserved", At: at.Add(2 * time.Millisecond)},
	}
	if err := s.RecordProbes(ctx, steps[0].ID, samples); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordProbes(ctx, steps[0].ID, []store.ProbeSample{{APIServer: "cp-a", Resource: "x", Status: 200, Outcome: "Fine", At: at}}); err == nil {
		t.Fatal("a probe with an unknown outcome was recorded")
	}
	got, err := s.ListProbes(ctx, steps[0].ID)
	if err != nil || len(got) != 3 || got[0].Outcome != "Spurious404" || got[0].Verb != "list" || !got[0].At.Equal(at) || got[1].Verb != "create" {
		t.Fatalf("probes = %+v, %v", got, err)
	}

	st, err := s.FinishUpgradeStep(ctx, steps[0].ID, store.StepPaused, "spurious 404 on cp-a")
	if err != nil || st.Outcome != store.StepPaused || st.FinishedAt == nil {
		t.Fatalf("finished step = %+v, %v", st, err)
	}
	if _, err := s.FinishUpgradeStep(ctx, steps[0].ID, store.StepPassed, ""); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("finishing a step twice: %v, want ErrNotFound", err)
	}

	paused, err := s.SetUpgradeRunState(ctx, run.ID, store.UpgradePaused, "spurious 404 on cp-a")
	if err != nil || paused.State != store.UpgradePaused || paused.FinishedAt != nil {
		t.Fatalf("paused run = %+v, %v", paused, err)
	}
	done, err := s.SetUpgradeRunState(ctx, run.ID, store.UpgradeAborted, "aborted by the operator")
	if err != nil || done.FinishedAt == nil || !done.State.Final() {
		t.Fatalf("aborted run = %+v, %v", done, err)
	}
	if _, err := s.SetUpgradeRunState(ctx, run.ID, store.UpgradeRunning, ""); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("an ended run changed state: %v", err)
	}
	if _, err := s.StartUpgradeStep(ctx, run.ID, store.NewUpgradeStep{Cluster: "fleet/c1", Kind: "verify"}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("a step of an ended run: %v, want ErrInvalid", err)
	}
	byUID, err := s.UpgradeRunsByUID(ctx, []string{"uid-1", "uid-none"})
	if err != nil || len(byUID) != 1 || byUID["uid-1"].ID != run.ID {
		t.Fatalf("runs by UID = %+v, %v; want only uid-1's run", byUID, err)
	}
	runs, err := s.ListUpgradeRuns(ctx, 10)
	if err != nil || len(runs) != 1 || runs[0].State != store.UpgradeAborted {
		t.Fatalf("runs = %+v, %v", runs, err)
	}
}

// Every kind of step the FleetUpgrade controller records is accepted,
// lb-handoff (migration 0007) and release (0012) included.
func TestUpgradeStepKinds(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newStore(t)
	run, err := s.StartUpgradeRun(ctx, store.NewUpgradeRun{FleetUpgrade: "fleet/kinds", UID: "uid-kinds", TargetVersion: "v1.37.2"})
	if err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"preflight", "wire-mvp", "bump", "machine", "verify", "soak", "lb-handoff", "release"} {
		st, err := s.StartUpgradeStep(ctx, run.ID, store.NewUpgradeStep{Cluster: "fleet/c1", Kind: kind, Machine: "cp-a"})
		if err != nil {
			t.Fatalf("recording a %s step: %v", kind, err)
		}
		if _, err := s.FinishUpgradeStep(ctx, st.ID, store.StepFailed, "removing server cp-a from load balancer c1-kube-api failed: forbidden"); err != nil {
			t.Fatalf("finishing a %s step: %v", kind, err)
		}
	}
}

// TestMachineStepRecordedOnce: a replacement machine's join is one step per
// run and cluster, however often it is started; other kinds repeat.
func TestMachineStepRecordedOnce(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newStore(t)
	run, err := s.StartUpgradeRun(ctx, store.NewUpgradeRun{FleetUpgrade: "once", UID: "uid-once", TargetVersion: "v1.37.2"})
	if err != nil {
		t.Fatal(err)
	}
	start := func(n store.NewUpgradeStep) store.UpgradeStep {
		t.Helper()
		st, err := s.StartUpgradeStep(ctx, run.ID, n)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	cp4 := store.NewUpgradeStep{Cluster: "fleet/prod", Kind: "machine", Machine: "cp-4", FromVersion: "v1.36.3", ToVersion: "v1.37.2"}
	first := start(cp4)
	if _, err := s.FinishUpgradeStep(ctx, first.ID, store.StepPassed, "joined"); err != nil {
		t.Fatal(err)
	}
	again := start(cp4)
	if again.ID != first.ID || again.Outcome != store.StepPassed {
		t.Errorf("starting cp-4's machine step again = %+v, want the first one, passed", again)
	}
	if other := start(store.NewUpgradeStep{Cluster: "fleet/other", Kind: "machine", Machine: "cp-4"}); other.ID == first.ID {
		t.Error("a machine of the same name in another cluster got the first cluster's step")
	}
	v1, v2 := start(store.NewUpgradeStep{Cluster: "fleet/prod", Kind: "verify", Machine: "cp-4"}), start(store.NewUpgradeStep{Cluster: "fleet/prod", Kind: "verify", Machine: "cp-4"})
	if v1.ID == v2.ID {
		t.Error("two verifier rounds share a step")
	}
	steps, err := s.ListUpgradeSteps(ctx, run.ID)
	if err != nil || len(steps) != 4 {
		t.Fatalf("steps = %d, %v; want 4 (one machine step for cp-4 in prod)", len(steps), err)
	}
}
