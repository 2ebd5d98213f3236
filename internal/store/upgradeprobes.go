package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// ProbeTally counts the probe samples of one step taken on one apiserver
// with one outcome.
type ProbeTally struct {
	StepID    string
	APIServer string
	Outcome   string
	Count     int
	// First and Last are when the first and the last of them were taken.
	First, Last time.Time
}

// TallyProbes counts a run's probe samples per step, apiserver and outcome,
// in step order, then by apiserver and outcome. It reads the run in one
// query, however many steps it has.
func (s *Store) TallyProbes(ctx context.Context, runID string) ([]ProbeTally, error) {
	if !isUUID(runID) {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT p.step_id, p.apiserver, p.outcome, count(*), min(p.at), max(p.at)
		FROM upgrade_probes p JOIN upgrade_steps st ON st.id = p.step_id
		WHERE st.run_id = $1
		GROUP BY st.seq, p.step_id, p.apiserver, p.outcome
		ORDER BY st.seq, p.apiserver, p.outcome`, runID)
	if err != nil {
		return nil, fmt.Errorf("counting probe samples: %w", err)
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (ProbeTally, error) {
		var t ProbeTally
		err := row.Scan(&t.StepID, &t.APIServer, &t.Outcome, &t.Count, &t.First, &t.Last)
		return t, err
	})
}

// ListRunProbes returns a run's probe samples whose outcome is one of
// outcomes, by step ID, each step's in time order.
func (s *Store) ListRunProbes(ctx context.Context, runID string, outcomes []string) (map[string][]ProbeSample, error) {
	if !isUUID(runID) || len(outcomes) == 0 {
		return map[string][]ProbeSample{}, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT p.step_id, p.apiserver, p.resource, p.verb, p.status, p.outcome, p.message, p.at
		FROM upgrade_probes p JOIN upgrade_steps st ON st.id = p.step_id
		WHERE st.run_id = $1 AND p.outcome = ANY($2)
		ORDER BY st.seq, p.at, p.id`, runID, outcomes)
	if err != nil {
		return nil, fmt.Errorf("listing probe samples: %w", err)
	}
	type stepSample struct {
		step string
		ProbeSample
	}
	samples, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (stepSample, error) {
		var p stepSample
		err := row.Scan(&p.step, &p.APIServer, &p.Resource, &p.Verb, &p.Status, &p.Outcome, &p.Message, &p.At)
		return p, err
	})
	if err != nil {
		return nil, fmt.Errorf("listing probe samples: %w", err)
	}
	byStep := map[string][]ProbeSample{}
	for _, p := range samples {
		byStep[p.step] = append(byStep[p.step], p.ProbeSample)
	}
	return byStep, nil
}
