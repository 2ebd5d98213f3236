package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
)

// UpgradeRunState is where an upgrade run stands.
type UpgradeRunState string

// The states of an upgrade run; the last three are final.
const (
	UpgradeRunning   UpgradeRunState = "running"
	UpgradePaused    UpgradeRunState = "paused"
	UpgradeSucceeded UpgradeRunState = "succeeded"
	UpgradeFailed    UpgradeRunState = "failed"
	UpgradeAborted   UpgradeRunState = "aborted"
)

// Final reports whether the run has ended.
func (s UpgradeRunState) Final() bool {
	return s == UpgradeSucceeded || s == UpgradeFailed || s == UpgradeAborted
}

// UpgradeRun is one run of a FleetUpgrade.
type UpgradeRun struct {
	ID            string          `json:"id"`
	FleetUpgrade  string          `json:"fleetUpgrade"`
	UID           string          `json:"uid"`
	TargetVersion string          `json:"targetVersion"`
	State         UpgradeRunState `json:"state"`
	Message       string          `json:"message,omitempty"`
	StartedAt     time.Time       `json:"startedAt"`
	FinishedAt    *time.Time      `json:"finishedAt,omitempty"`
}

// NewUpgradeRun is what StartUpgradeRun needs.
type NewUpgradeRun struct {
	// FleetUpgrade is the object's "namespace/name".
	FleetUpgrade string
	// UID is the object's UID: starting a run for a UID that has one
	// returns that run.
	UID           string
	TargetVersion string
}

// UpgradeStepOutcome is where a step stands.
type UpgradeStepOutcome string

// The outcomes of a step.
const (
	StepRunning UpgradeStepOutcome = "running"
	StepPassed  UpgradeStepOutcome = "passed"
	StepFailed  UpgradeStepOutcome = "failed"
	StepPaused  UpgradeStepOutcome = "paused"
)

// UpgradeStep is one step of a run on one cluster: preflight, wire-mvp,
// bump, machine (one control-plane machine replaced), verify, soak,
// lb-handoff (a server leaving or joining the cluster's API load balancer),
// release (a Machine KubeadmControlPlane chose for deletion, let go once its
// gate passed).
type UpgradeStep struct {
	ID          string             `json:"id"`
	RunID       string             `json:"runID"`
	Seq         int                `json:"seq"`
	Cluster     string             `json:"cluster"`
	Kind        string             `json:"kind"`
	Machine     string             `json:"machine,omitempty"`
	FromVersion string             `json:"fromVersion,omitempty"`
	ToVersion   string             `json:"toVersion,omitempty"`
	Outcome     UpgradeStepOutcome `json:"outcome"`
	Message     string             `json:"message,omitempty"`
	StartedAt   time.Time          `json:"startedAt"`
	FinishedAt  *time.Time         `json:"finishedAt,omitempty"`
}

// NewUpgradeStep is what StartUpgradeStep needs.
type NewUpgradeStep struct {
	Cluster, Kind, Machine string
	FromVersion, ToVersion string
}

// ProbeSample is one verifier probe, as recorded.
type ProbeSample struct {
	APIServer string    `json:"apiserver"`
	Resource  string    `json:"resource"`
	Verb      string    `json:"verb"`
	Status    int       `json:"status"`
	Outcome   string    `json:"outcome"`
	Message   string    `json:"message,omitempty"`
	At        time.Time `json:"at"`
}

const upgradeRunColumns = "id, fleet_upgrade, uid, target_version, state, message, started_at, finished_at"

func scanUpgradeRun(row pgx.Row) (UpgradeRun, error) {
	var r UpgradeRun
	err := row.Scan(&r.ID, &r.FleetUpgrade, &r.UID, &r.TargetVersion, &r.State, &r.Message, &r.StartedAt, &r.FinishedAt)
	return r, err
}

// StartUpgradeRun records a new run, or returns the run of the same UID.
func (s *Store) StartUpgradeRun(ctx context.Context, n NewUpgradeRun) (UpgradeRun, error) {
	if n.FleetUpgrade == "" || n.UID == "" || n.TargetVersion == "" {
		return UpgradeRun{}, fmt.Errorf("starting an upgrade run: fleet upgrade, UID and target version are required: %w", ErrInvalid)
	}
	r, err := scanUpgradeRun(s.pool.QueryRow(ctx, `
		INSERT INTO upgrade_runs (fleet_upgrade, uid, target_version) VALUES ($1, $2, $3)
		ON CONFLICT (uid) DO UPDATE SET uid = EXCLUDED.uid
		RETURNING `+upgradeRunColumns, n.FleetUpgrade, n.UID, n.TargetVersion))
	if err != nil {
		return UpgradeRun{}, fmt.Errorf("starting an upgrade run: %w", err)
	}
	return r, nil
}

// SetUpgradeRunState moves a run to state with a message. A final state
// sets the finish time; a run that ended cannot change.
func (s *Store) SetUpgradeRunState(ctx context.Context, runID string, state UpgradeRunState, message string) (UpgradeRun, error) {
	if !isUUID(runID) {
		return UpgradeRun{}, fmt.Errorf("upgrade run %q: %w", runID, ErrNotFound)
	}
	r, err := scanUpgradeRun(s.pool.QueryRow(ctx, `
		UPDATE upgrade_runs SET state = $2, message = $3,
		       finished_at = CASE WHEN $2 IN ('running', 'paused') THEN NULL ELSE now() END
		 WHERE id = $1 AND finished_at IS NULL
		RETURNING `+upgradeRunColumns, runID, string(state), message))
	if errors.Is(err, pgx.ErrNoRows) {
		return UpgradeRun{}, fmt.Errorf("upgrade run %s: not found or already ended: %w", runID, ErrNotFound)
	}
	if err != nil {
		return UpgradeRun{}, fmt.Errorf("updating upgrade run %s: %w", runID, err)
	}
	return r, nil
}

// GetUpgradeRun returns a run.
func (s *Store) GetUpgradeRun(ctx context.Context, runID string) (UpgradeRun, error) {
	if !isUUID(runID) {
		return UpgradeRun{}, fmt.Errorf("upgrade run %q: %w", runID, ErrNotFound)
	}
	r, err := scanUpgradeRun(s.pool.QueryRow(ctx, "SELECT "+upgradeRunColumns+" FROM upgrade_runs WHERE id = $1", runID))
	if errors.Is(err, pgx.ErrNoRows) {
		return UpgradeRun{}, fmt.Errorf("upgrade run %s: %w", runID, ErrNotFound)
	}
	return r, err
}

// UpgradeRunsByUID returns the runs of the FleetUpgrades with the given
// UIDs, by UID; a UID without a run is absent from the map.
func (s *Store) UpgradeRunsByUID(ctx context.Context, uids []string) (map[string]UpgradeRun, error) {
	out := make(map[string]UpgradeRun, len(uids))
	if len(uids) == 0 {
		return out, nil
	}
	rows, err := s.pool.Query(ctx, "SELECT "+upgradeRunColumns+" FROM upgrade_runs WHERE uid = ANY($1)", uids)
	if err != nil {
		return nil, fmt.Errorf("reading upgrade runs: %w", err)
	}
	runs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (UpgradeRun, error) { return scanUpgradeRun(row) })
	if err != nil {
		return nil, fmt.Errorf("reading upgrade runs: %w", err)
	}
	for _, r := range runs {
		out[r.UID] = r
	}
	return out, nil
}

// ListUpgradeRuns returns the newest runs first.
func (s *Store) ListUpgradeRuns(ctx context.Context, limit int) ([]UpgradeRun, error) {
	rows, err := s.pool.Query(ctx, "SELECT "+upgradeRunColumns+" FROM upgrade_runs ORDER BY started_at DESC, id LIMIT "+
		strconv.Itoa(clampLimit(limit, 50)))
	if err != nil {
		return nil, fmt.Errorf("listing upgrade runs: %w", err)
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (UpgradeRun, error) { return scanUpgradeRun(row) })
}

const upgradeStepColumns = "id, run_id, seq, cluster, kind, machine, from_version, to_version, outcome, message, started_at, finished_at"

func scanUpgradeStep(row pgx.Row) (UpgradeStep, error) {
	var st UpgradeStep
	err := row.Scan(&st.ID, &st.RunID, &st.Seq, &st.Cluster, &st.Kind, &st.Machine, &st.FromVersion, &st.ToVersion,
		&st.Outcome, &st.Message, &st.StartedAt, &st.FinishedAt)
	return st, err
}

// StartUpgradeStep records a step of a run that has not ended. A machine
// step (kind "machine": a replacement machine joined) is recorded once per
// run, cluster and machine: starting it again returns the step recorded
// first, finished or not, so that a caller that recorded it and then failed
// to write its own status does not record the join twice.
func (s *Store) StartUpgradeStep(ctx context.Context, runID string, n NewUpgradeStep) (UpgradeStep, error) {
	if !isUUID(runID) {
		return UpgradeStep{}, fmt.Errorf("upgrade run %q: %w", runID, ErrNotFound)
	}
	var st UpgradeStep
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// Lock the run so that concurrent steps get distinct numbers.
		var open bool
		if err := tx.QueryRow(ctx, "SELECT finished_at IS NULL FROM upgrade_runs WHERE id = $1 FOR UPDATE", runID).Scan(&open); err != nil {
			if errors.Is(err, pgx.ErrNoRows) {
				return fmt.Errorf("upgrade run %s: %w", runID, ErrNotFound)
			}
			return err
		}
		if !open {
			return fmt.Errorf("upgrade run %s has ended: %w", runID, ErrInvalid)
		}
		if n.Kind == "machine" && n.Machine != "" {
			existing, err := scanUpgradeStep(tx.QueryRow(ctx, `SELECT `+upgradeStepColumns+` FROM upgrade_steps
				WHERE run_id = $1 AND kind = 'machine' AND cluster = $2 AND machine = $3 ORDER BY seq LIMIT 1`, runID, n.Cluster, n.Machine))
			if err == nil {
				st = existing
				return nil
			}
			if !errors.Is(err, pgx.ErrNoRows) {
				return err
			}
		}
		var err error
		st, err = scanUpgradeStep(tx.QueryRow(ctx, `
			INSERT INTO upgrade_steps (run_id, seq, cluster, kind, machine, from_version, to_version)
			VALUES ($1, (SELECT COALESCE(max(seq), 0) + 1 FROM upgrade_steps WHERE run_id = $1), $2, $3, $4, $5, $6)
			RETURNING `+upgradeStepColumns, runID, n.Cluster, n.Kind, n.Machine, n.FromVersion, n.ToVersion))
		return err
	})
	if err != nil {
		return UpgradeStep{}, fmt.Errorf("starting an upgrade step: %w", err)
	}
	return st, nil
}

// FinishUpgradeStep sets a running step's outcome.
func (s *Store) FinishUpgradeStep(ctx context.Context, stepID string, outcome UpgradeStepOutcome, message string) (UpgradeStep, error) {
	if !isUUID(stepID) || outcome == StepRunning {
		return UpgradeStep{}, fmt.Errorf("finishing upgrade step %q with %q: %w", stepID, outcome, ErrInvalid)
	}
	st, err := scanUpgradeStep(s.pool.QueryRow(ctx, `
		UPDATE upgrade_steps SET outcome = $2, message = $3, finished_at = now()
		 WHERE id = $1 AND outcome = 'running'
		RETURNING `+upgradeStepColumns, stepID, string(outcome), message))
	if errors.Is(err, pgx.ErrNoRows) {
		return UpgradeStep{}, fmt.Errorf("upgrade step %s: not found or already finished: %w", stepID, ErrNotFound)
	}
	if err != nil {
		return UpgradeStep{}, fmt.Errorf("finishing upgrade step %s: %w", stepID, err)
	}
	return st, nil
}

// ListUpgradeSteps returns a run's steps in order.
func (s *Store) ListUpgradeSteps(ctx context.Context, runID string) ([]UpgradeStep, error) {
	if !isUUID(runID) {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, "SELECT "+upgradeStepColumns+" FROM upgrade_steps WHERE run_id = $1 ORDER BY seq", runID)
	if err != nil {
		return nil, fmt.Errorf("listing upgrade steps: %w", err)
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (UpgradeStep, error) { return scanUpgradeStep(row) })
}

// RecordProbes appends probe samples to a step.
func (s *Store) RecordProbes(ctx context.Context, stepID string, samples []ProbeSample) error {
	if !isUUID(stepID) {
		return fmt.Errorf("upgrade step %q: %w", stepID, ErrNotFound)
	}
	if len(samples) == 0 {
		return nil
	}
	rows := make([][]any, len(samples))
	for i, p := range samples {
		verb := p.Verb
		if verb == "" {
			verb = "list"
		}
		rows[i] = []any{stepID, p.APIServer, p.Resource, verb, p.Status, p.Outcome, p.Message, p.At}
	}
	_, err := s.pool.CopyFrom(ctx, pgx.Identifier{"upgrade_probes"},
		[]string{"step_id", "apiserver", "resource", "verb", "status", "outcome", "message", "at"}, pgx.CopyFromRows(rows))
	if err != nil {
		return fmt.Errorf("recording %d probe samples: %w", len(samples), err)
	}
	return nil
}

// ListProbes returns a step's probe samples in time order.
func (s *Store) ListProbes(ctx context.Context, stepID string) ([]ProbeSample, error) {
	if !isUUID(stepID) {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT apiserver, resource, verb, status, outcome, message, at
		FROM upgrade_probes WHERE step_id = $1 ORDER BY at, id`, stepID)
	if err != nil {
		return nil, fmt.Errorf("listing probe samples: %w", err)
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (ProbeSample, error) {
		var p ProbeSample
		err := row.Scan(&p.APIServer, &p.Resource, &p.Verb, &p.Status, &p.Outcome, &p.Message, &p.At)
		return p, err
	})
}
