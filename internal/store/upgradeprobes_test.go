package store_test

import (
	"testing"
	"time"

	"bex.co/bex/internal/store"
)

func TestTallyProbes(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newStore(t)

	run, err := s.StartUpgradeRun(ctx, store.NewUpgradeRun{FleetUpgrade: "to-1-37", UID: "uid-tally", TargetVersion: "v1.37.2"})
	if err != nil {
		t.Fatal(err)
	}
	other, err := s.StartUpgradeRun(ctx, store.NewUpgradeRun{FleetUpgrade: "other", UID: "uid-other", TargetVersion: "v1.37.2"})
	if err != nil {
		t.Fatal(err)
	}
	step := func(runID string) string {
		st, err := s.StartUpgradeStep(ctx, runID, store.NewUpgradeStep{Cluster: "fleet/c1", Kind: "verify"})
		if err != nil {
			t.Fatal(err)
		}
		return st.ID
	}
	first, second, foreign := step(run.ID), step(run.ID), step(other.ID)
	at := time.Now().UTC().Truncate(time.Microsecond)
	record := func(stepID string, samples ...store.ProbeSample) {
		if err := s.RecordProbes(ctx, stepID, samples); err != nil {
			t.Fatal(err)
		}
	}
	record(first,
		store.ProbeSample{APIServer: "cp-1", Resource: "a", Status: 200, Outcome: "ServedLocally", At: at},
		store.ProbeSample{APIServer: "cp-1", Resource: "b", Status: 200, Outcome: "ServedLocally", At: at.Add(time.Second)},
		store.ProbeSample{APIServer: "cp-2", Resource: "a", Status: 404, Outcome: "Spurious404", Message: "404 page not found", At: at.Add(2 * time.Second)},
	)
	record(second, store.ProbeSample{APIServer: "cp-2", Resource: "a", Status: 200, Outcome: "Proxied", At: at.Add(3 * time.Second)})
	record(foreign, store.ProbeSample{APIServer: "cp-9", Resource: "a", Status: 503, Outcome: "Honest503", At: at})

	tallies, err := s.TallyProbes(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := []store.ProbeTally{
		{StepID: first, APIServer: "cp-1", Outcome: "ServedLocally", Count: 2, First: at, Last: at.Add(time.Second)},
		{StepID: first, APIServer: "cp-2", Outcome: "Spurious404", Count: 1, First: at.Add(2 * time.Second), Last: at.Add(2 * time.Second)},
		{StepID: second, APIServer: "cp-2", Outcome: "Proxied", Count: 1, First: at.Add(3 * time.Second), Last: at.Add(3 * time.Second)},
	}
	if len(tallies) != len(want) {
		t.Fatalf("tallies = %+v, want %+v", tallies, want)
	}
	for i := range want {
		g, w := tallies[i], want[i]
		if g.StepID != w.StepID || g.APIServer != w.APIServer || g.Outcome != w.Outcome || g.Count != w.Count || !g.First.Equal(w.First) || !g.Last.Equal(w.Last) {
			t.Errorf("tally %d = %+v, want %+v", i, g, w)
		}
	}

	failed, err := s.ListRunProbes(ctx, run.ID, []string{"Spurious404", "Honest503", "Error"})
	if err != nil {
		t.Fatal(err)
	}
	if len(failed) != 1 || len(failed[first]) != 1 || failed[first][0].APIServer != "cp-2" || failed[first][0].Message != "404 page not found" {
		t.Fatalf("failed probes = %+v; want cp-2's 404 of the first step only (not the other run's 503)", failed)
	}
	if none, err := s.TallyProbes(ctx, "not-a-uuid"); err != nil || len(none) != 0 {
		t.Fatalf("tallies of a malformed run ID = %+v, %v", none, err)
	}
}
