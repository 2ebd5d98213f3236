package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// RunStatus is where a one-off run stands.
type RunStatus string

// The states of a run. A run starts running and ends once: succeeded when
// its command exited 0, failed otherwise (or when it never started), lost
// when the API server running it stopped answering before it ended
// (MarkLostRuns).
const (
	RunRunning   RunStatus = "running"
	RunSucceeded RunStatus = "succeeded"
	RunFailed    RunStatus = "failed"
	RunLost      RunStatus = "lost"
)

// LostRunReason is the reason of a lost run.
const LostRunReason = "the API server running it stopped answering"

// RunEnd says how a run ended, in its app.run.end audit entry (details
// "ended").
type RunEnd string

// How runs end. FinishRun takes all but RunEndLost, which only
// MarkLostRuns records.
const (
	// RunExited: the command exited on its own, whatever its status.
	RunExited RunEnd = "exited"
	// RunStopped: a stop was asked of it (RequestRunStop); the entry's
	// details name who asked ("stoppedBy").
	RunStopped RunEnd = "stopped"
	// RunTimedOut: it went past its time limit.
	RunTimedOut RunEnd = "timedOut"
	// RunDisconnected: the client it was attached to went away.
	RunDisconnected RunEnd = "disconnected"
	// RunKilled: the platform ended it for the reason recorded: its app
	// was removed, the platform stopped, it went past its memory limit.
	RunKilled RunEnd = "killed"
	// RunNotStarted: its command never started (the reason says why).
	RunNotStarted RunEnd = "notStarted"
	// RunEndLost: the API server running it stopped answering
	// (MarkLostRuns).
	RunEndLost RunEnd = "lost"
)

// Audit log entries of runs written by the store, with a run's end.
const (
	// RunEndAction is the audit action of a run's end: FinishRun and
	// MarkLostRuns write one per run they end, in the same statement, so
	// every end is audited once. Its target is the app, its details
	// {"run", "release", "exitCode" (null without one), "ended" (a
	// RunEnd), "reason", "detached", "startedBy", "startedAt" and, for a
	// stopped run, "stoppedBy"}.
	RunEndAction = "app.run.end"
	// PlatformActor is the audit actor of what the platform does on its
	// own, such as ending a lost run; a run's other ends are audited
	// under the one who started it.
	PlatformActor = "platform"
)

// RunEndDetails are the details of an app.run.end audit entry
// (RunEndAction), as the store writes them.
type RunEndDetails struct {
	Run     int `json:"run"`
	Release int `json:"release"`
	// ExitCode is nil for a run lost or never started.
	ExitCode *int   `json:"exitCode"`
	Ended    RunEnd `json:"ended"`
	Reason   string `json:"reason"`
	Detached bool   `json:"detached"`
	// StartedBy is who started the run, the entry's actor but for a
	// lost run.
	StartedBy string    `json:"startedBy"`
	StartedAt time.Time `json:"startedAt"`
	// StoppedBy is who asked a stopped run to stop; absent otherwise.
	StoppedBy string `json:"stoppedBy,omitempty"`
}

// runEndDetails is the SQL of an app.run.end entry's details
// (RunEndDetails), of a row r of runs with its end in end.
func runEndDetails(end string) string {
	return "jsonb_build_object('run', r.number, 'release', r.release, 'exitCode', r.exit_code, 'ended', " + end +
		"::text, 'reason', r.reason, 'detached', r.detached, 'startedBy', r.created_by, 'startedAt', r.started_at) || " +
		"CASE WHEN " + end + "::text = 'stopped' AND r.stop_requested_by <> '' THEN jsonb_build_object('stoppedBy', r.stop_requested_by) ELSE '{}'::jsonb END"
}

// Limits of a run's record.
const (
	// MaxRunArgs is how many arguments a run's command may have.
	MaxRunArgs = 256
	// MaxRunCommandBytes bounds a run's command line, all arguments.
	MaxRunCommandBytes = 16 << 10
	// maxRunReasonBytes bounds the reason recorded.
	maxRunReasonBytes = 4 << 10
)

// StaleRunAfter is how long a run without a server (NewRun.ServerID) may
// stay running before the quota stops counting it: a platform that died
// mid-run leaves its row running, and it must not hold the tenant's
// concurrent-runs quota for ever. Runs are limited to far less (the API's
// maximum run time). A run with a server is marked lost instead, soon
// after its server stops answering (MarkLostRuns).
const StaleRunAfter = 25 * time.Hour

// Run is one one-off command run in a fresh instance of an app's release.
type Run struct {
	ID       string `json:"id"`
	TenantID string `json:"tenantID"`
	App      string `json:"app"`
	// Number is 1, 2, 3, ... per app; the run is run.<Number>.
	Number   int      `json:"number"`
	Release  int      `json:"release"`
	Command  []string `json:"command"`
	Terminal bool     `json:"terminal"`
	// Detached says its output went to the app's log, not to a client.
	Detached  bool      `json:"detached"`
	CreatedBy string    `json:"createdBy"`
	Status    RunStatus `json:"status"`
	// ExitCode is the command's exit status once it ended; nil while it
	// runs or when it never started.
	ExitCode *int `json:"exitCode,omitempty"`
	// Reason says why it ended when not on its own, or why it did not
	// start.
	Reason     string     `json:"reason,omitempty"`
	StartedAt  time.Time  `json:"startedAt"`
	FinishedAt *time.Time `json:"finishedAt,omitempty"`
	// StopRequestedAt is when a stop was asked of it (RequestRunStop),
	// StopRequestedBy by whom; nil and "" when none was.
	StopRequestedAt *time.Time `json:"stopRequestedAt,omitempty"`
	StopRequestedBy string     `json:"stopRequestedBy,omitempty"`
	// ServerID is the API server process that runs it (NewRun.ServerID);
	// "" when none was recorded.
	ServerID string `json:"serverID,omitempty"`
}

// NewRun is what CreateRun needs.
type NewRun struct {
	TenantID  string
	App       string
	Release   int
	Command   []string
	Terminal  bool
	Detached  bool
	CreatedBy string
	// ServerID, when set, is the API server process that runs it, a UUID
	// of its own (one per process) that it keeps alive with
	// HeartbeatRunServer: CreateRun counts as a heartbeat, and once the
	// server is not seen for a while MarkLostRuns ends the run as lost.
	// A run without one is never marked lost; it stops counting towards
	// the quota after StaleRunAfter.
	ServerID string
	// ConcurrentRuns, when set, is the tenant's quota of runs running at
	// once: a run beyond it is refused with a *QuotaError and nothing is
	// recorded.
	ConcurrentRuns *int
}

// RunResult is how a run ended, for FinishRun.
type RunResult struct {
	// ExitCode is the command's exit status; nil when it never started.
	ExitCode *int
	// Reason says why it ended when not on its own, or why it did not
	// start; cut at 4 KiB.
	Reason string
	// End says how it ended, for its audit entry. Empty means RunExited
	// with an exit status and no reason, RunNotStarted without an exit
	// status, and RunKilled otherwise. RunEndLost is not taken.
	End RunEnd
}

// runEnds are the ends FinishRun takes.
var runEnds = map[RunEnd]bool{RunExited: true, RunStopped: true, RunTimedOut: true, RunDisconnected: true, RunKilled: true, RunNotStarted: true}

// end is res.End, or what it means when empty.
func (res RunResult) end() RunEnd {
	switch {
	case res.End != "":
		return res.End
	case res.ExitCode == nil:
		return RunNotStarted
	case res.Reason == "":
		return RunExited
	}
	return RunKilled
}

const runColumns = "id, tenant_id, app, number, release, command, terminal, detached, created_by, status, exit_code, reason, started_at, finished_at, " +
	"stop_requested_at, stop_requested_by, coalesce(server_id::text, '')"

func scanRun(row pgx.Row) (Run, error) {
	var r Run
	err := row.Scan(&r.ID, &r.TenantID, &r.App, &r.Number, &r.Release, &r.Command, &r.Terminal, &r.Detached, &r.CreatedBy,
		&r.Status, &r.ExitCode, &r.Reason, &r.StartedAt, &r.FinishedAt, &r.StopRequestedAt, &r.StopRequestedBy, &r.ServerID)
	return r, err
}

// CheckRunCommand reports what is wrong with a run's command line: empty,
// too many arguments, too long, a NUL byte (no process argument holds one)
// or text that is not UTF-8. The error wraps ErrInvalid.
func CheckRunCommand(args []string) error {
	switch {
	case len(args) == 0 || args[0] == "":
		return fmt.Errorf("%w command: give the command to run, such as [\"sh\", \"-c\", \"echo hello\"]", ErrInvalid)
	case len(args) > MaxRunArgs:
		return fmt.Errorf("%w command: %d arguments; at most %d", ErrInvalid, len(args), MaxRunArgs)
	}
	n := 0
	for i, a := range args {
		n += len(a)
		switch {
		case strings.IndexByte(a, 0) >= 0:
			return fmt.Errorf("%w command: argument %d holds a NUL byte, which no process argument can", ErrInvalid, i)
		case !utf8.ValidString(a):
			return fmt.Errorf("%w command: argument %d is not UTF-8 text", ErrInvalid, i)
		}
	}
	if n > MaxRunCommandBytes {
		return fmt.Errorf("%w command: %d bytes; a command line is at most %d", ErrInvalid, n, MaxRunCommandBytes)
	}
	return nil
}

// CreateRun records a running run of an app and gives it the app's next
// run number. The error wraps ErrInvalid when a field is missing or the
// command is not one CheckRunCommand takes (or the server is not a UUID),
// ErrNotFound when the tenant
// does not exist, and ErrQuotaExceeded when the tenant runs
// nr.ConcurrentRuns already; concurrent calls for one tenant are checked
// one at a time, so they cannot pass a quota together that only one fits.
func (s *Store) CreateRun(ctx context.Context, nr NewRun) (Run, error) {
	switch {
	case nr.App == "":
		return Run{}, fmt.Errorf("%w run: the app is not named", ErrInvalid)
	case nr.Release < 1:
		return Run{}, fmt.Errorf("%w run of %s: release %d", ErrInvalid, nr.App, nr.Release)
	case nr.CreatedBy == "":
		return Run{}, fmt.Errorf("%w run of %s: it does not say who ran it", ErrInvalid, nr.App)
	}
	if err := CheckRunCommand(nr.Command); err != nil {
		return Run{}, err
	}
	if nr.ServerID != "" && !isUUID(nr.ServerID) {
		return Run{}, fmt.Errorf("%w run of %s: server %q is not a UUID", ErrInvalid, nr.App, nr.ServerID)
	}
	if !isUUID(nr.TenantID) {
		return Run{}, fmt.Errorf("tenant %q: %w", nr.TenantID, ErrNotFound)
	}
	var server *string
	if nr.ServerID != "" {
		server = &nr.ServerID
	}
	var r Run
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if nr.ConcurrentRuns != nil {
			if err := checkRunQuota(ctx, tx, nr.TenantID, *nr.ConcurrentRuns); err != nil {
				return err
			}
		}
		number, err := nextAppNumber(ctx, tx, nr.TenantID, nr.App, "last_run")
		if err != nil {
			return err
		}
		r, err = scanRun(tx.QueryRow(ctx,
			"INSERT INTO runs (tenant_id, app, number, release, command, terminal, detached, created_by, server_id) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING "+runColumns,
			nr.TenantID, nr.App, number, nr.Release, nr.Command, nr.Terminal, nr.Detached, nr.CreatedBy, server))
		if err != nil || server == nil {
			return err
		}
		// Seen now, last (its row stays locked until the commit): no
		// sweep takes the run for lost before its server's next
		// heartbeat is due.
		return heartbeat(ctx, tx, *server)
	})
	if _, ok := constraintViolated(err, codeForeignKeyViolation); ok {
		return Run{}, fmt.Errorf("tenant %s: %w", nr.TenantID, ErrNotFound)
	}
	if errors.Is(err, ErrQuotaExceeded) {
		return Run{}, err
	}
	if err != nil {
		return Run{}, fmt.Errorf("recording a run of %s: %w", nr.App, err)
	}
	return r, nil
}

// RunningRuns is how many of the tenant's runs run: those started within
// StaleRunAfter that have not ended (a lost run has ended).
func (s *Store) RunningRuns(ctx context.Context, tenantID string) (int, error) {
	if !isUUID(tenantID) {
		return 0, fmt.Errorf("tenant %q: %w", tenantID, ErrNotFound)
	}
	return runningRuns(ctx, s.pool, tenantID)
}

// runsRunning is the SQL condition of a row of runs that runs: started
// within StaleRunAfter, given as the query's parameter param, and not
// ended. RunningRuns counts these, RunningRunsOf lists them.
func runsRunning(param string) string {
	return "status = 'running' AND started_at > now() - " + param + "::interval"
}

func runningRuns(ctx context.Context, q querier, tenantID string) (int, error) {
	var n int
	err := q.QueryRow(ctx, "SELECT count(*) FROM runs WHERE tenant_id = $1 AND "+runsRunning("$2"),
		tenantID, StaleRunAfter).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("counting the running runs of tenant %s: %w", tenantID, err)
	}
	return n, nil
}

// checkRunQuota refuses a run when the tenant runs max already; it takes
// the tenant's run lock for tx's lifetime.
func checkRunQuota(ctx context.Context, tx pgx.Tx, tenantID string, max int) error {
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1, hashtext($2))", quotaLockClass, tenantID+"/runs"); err != nil {
		return fmt.Errorf("taking the run lock of tenant %s: %w", tenantID, err)
	}
	n, err := runningRuns(ctx, tx, tenantID)
	if err != nil {
		return err
	}
	if n >= max {
		return &QuotaError{Quota: "concurrentRuns", Limit: fmt.Sprint(max),
			Detail: fmt.Sprintf("%d of its one-off runs %s running; run again when one has ended, or ask the operator to raise the quota", n, plural(n, "is", "are"))}
	}
	return nil
}

// FinishRun records how a running run ended and returns it, and audits
// its end (RunEndAction, under the one who started it) with the same
// statement: a run that ends is audited once, and one that had ended is
// not audited again. The error wraps ErrNotFound when the run does not
// exist, ErrConflict when it has ended already (a lost run included: its
// record stays lost), and ErrInvalid when res.End is not one it takes.
func (s *Store) FinishRun(ctx context.Context, runID string, res RunResult) (Run, error) {
	end := res.end()
	if !runEnds[end] {
		return Run{}, fmt.Errorf("%w end of run %s: %q is not how a run ends here", ErrInvalid, runID, res.End)
	}
	if !isUUID(runID) {
		return Run{}, fmt.Errorf("run %q: %w", runID, ErrNotFound)
	}
	status := RunFailed
	if res.ExitCode != nil && *res.ExitCode == 0 && res.Reason == "" {
		status = RunSucceeded
	}
	reason := strings.ToValidUTF8(res.Reason, "?")
	if len(reason) > maxRunReasonBytes {
		reason = strings.ToValidUTF8(reason[:maxRunReasonBytes], "")
	}
	r, err := scanRun(s.pool.QueryRow(ctx,
		"WITH r AS (UPDATE runs SET status = $2, exit_code = $3, reason = $4, finished_at = now() WHERE id = $1 AND status = 'running' RETURNING *), "+
			"a AS (INSERT INTO audit_log (tenant_id, actor, action, target, details) SELECT r.tenant_id, r.created_by, $6, r.app, "+runEndDetails("$5")+" FROM r) "+
			"SELECT "+runColumns+" FROM r",
		runID, status, res.ExitCode, reason, string(end), RunEndAction))
	if errors.Is(err, pgx.ErrNoRows) {
		var exists bool
		if err := s.pool.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM runs WHERE id = $1)", runID).Scan(&exists); err != nil {
			return Run{}, fmt.Errorf("reading run %s: %w", runID, err)
		}
		if exists {
			return Run{}, fmt.Errorf("run %s has ended already: %w", runID, ErrConflict)
		}
		return Run{}, fmt.Errorf("run %s: %w", runID, ErrNotFound)
	}
	if err != nil {
		return Run{}, fmt.Errorf("finishing run %s: %w", runID, err)
	}
	return r, nil
}

// RequestRunStop records that by asks run.number of the tenant's app to
// stop, and returns the run. Whoever runs it ends it (StopRequestedRuns
// tells); the run's end is then recorded by FinishRun as any other. A stop
// asked again of a run that still runs keeps the first one's time and
// asker. The error wraps ErrNotFound when the run does not exist,
// ErrConflict when it has ended already (the ended run is returned with
// it), and ErrInvalid when by is empty.
func (s *Store) RequestRunStop(ctx context.Context, tenantID, app string, number int, by string) (Run, error) {
	if by == "" {
		return Run{}, fmt.Errorf("%w stop of run.%d of %s: it does not say who asks", ErrInvalid, number, app)
	}
	if !isUUID(tenantID) {
		return Run{}, fmt.Errorf("tenant %q: %w", tenantID, ErrNotFound)
	}
	r, err := scanRun(s.pool.QueryRow(ctx,
		"UPDATE runs SET stop_requested_at = coalesce(stop_requested_at, now()), "+
			"stop_requested_by = CASE WHEN stop_requested_at IS NULL THEN $4 ELSE stop_requested_by END "+
			"WHERE tenant_id = $1 AND app = $2 AND number = $3 AND status = 'running' RETURNING "+runColumns,
		tenantID, app, number, by))
	if errors.Is(err, pgx.ErrNoRows) {
		r, err = scanRun(s.pool.QueryRow(ctx, "SELECT "+runColumns+" FROM runs WHERE tenant_id = $1 AND app = $2 AND number = $3", tenantID, app, number))
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return Run{}, fmt.Errorf("run.%d of %s: %w", number, app, ErrNotFound)
		case err != nil:
			return Run{}, fmt.Errorf("reading run.%d of %s: %w", number, app, err)
		case r.Status == RunRunning:
			// It ended and is running: it cannot be both.
			return Run{}, fmt.Errorf("run.%d of %s changed while being stopped: try again", number, app)
		}
		return r, fmt.Errorf("run.%d of %s has ended already: %w", number, app, ErrConflict)
	}
	if err != nil {
		return Run{}, fmt.Errorf("asking run.%d of %s to stop: %w", number, app, err)
	}
	return r, nil
}

// RunsToEnd returns those of the runs ids (their IDs; others are ignored)
// that whoever runs them must end now: running ones a stop was asked of
// (RequestRunStop; StopRequestedBy says who asked), and lost ones
// (MarkLostRuns; Status RunLost), which no longer count towards the
// quota and must not run on when their server turns out alive. A run that
// ended otherwise, or runs on unasked, is not returned.
func (s *Store) RunsToEnd(ctx context.Context, ids []string) ([]Run, error) {
	valid := make([]string, 0, len(ids))
	for _, id := range ids {
		if isUUID(id) {
			valid = append(valid, id)
		}
	}
	if len(valid) == 0 {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, "SELECT "+runColumns+" FROM runs WHERE id = ANY($1::uuid[]) AND "+
		"(status = 'running' AND stop_requested_at IS NOT NULL OR status = 'lost')", valid)
	if err != nil {
		return nil, fmt.Errorf("reading which of %d runs to end: %w", len(valid), err)
	}
	runs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Run, error) { return scanRun(row) })
	if err != nil {
		return nil, fmt.Errorf("reading which of %d runs to end: %w", len(valid), err)
	}
	return runs, nil
}

// RunningRunsOf returns the app's runs that run, oldest first: those
// started within StaleRunAfter that have not ended, as RunningRuns counts
// them (a lost run has ended).
func (s *Store) RunningRunsOf(ctx context.Context, tenantID, app string) ([]Run, error) {
	if !isUUID(tenantID) {
		return nil, fmt.Errorf("tenant %q: %w", tenantID, ErrNotFound)
	}
	rows, err := s.pool.Query(ctx, "SELECT "+runColumns+" FROM runs WHERE tenant_id = $1 AND app = $2 AND "+runsRunning("$3")+
		" ORDER BY number", tenantID, app, StaleRunAfter)
	if err != nil {
		return nil, fmt.Errorf("listing the running runs of %s: %w", app, err)
	}
	runs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Run, error) { return scanRun(row) })
	if err != nil {
		return nil, fmt.Errorf("listing the running runs of %s: %w", app, err)
	}
	return runs, nil
}

// ListRuns returns the app's runs, newest first; limit 0 means 50, and it
// is capped at 1000.
func (s *Store) ListRuns(ctx context.Context, tenantID, app string, limit int) ([]Run, error) {
	if !isUUID(tenantID) {
		return nil, fmt.Errorf("tenant %q: %w", tenantID, ErrNotFound)
	}
	if limit <= 0 {
		limit = defaultBuildLimit
	}
	limit = min(limit, maxListLimit)
	rows, err := s.pool.Query(ctx, "SELECT "+runColumns+" FROM runs WHERE tenant_id = $1 AND app = $2 ORDER BY number DESC LIMIT $3",
		tenantID, app, limit)
	if err != nil {
		return nil, fmt.Errorf("listing the runs of %s: %w", app, err)
	}
	runs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Run, error) { return scanRun(row) })
	if err != nil {
		return nil, fmt.Errorf("listing the runs of %s: %w", app, err)
	}
	return runs, nil
}

// HeartbeatRunServer records that the API server process serverID (a UUID
// of its own, NewRun.ServerID) is alive now, by the database's clock, for
// all the runs it runs: one upsert, whatever their number. The error wraps
// ErrInvalid when serverID is not a UUID.
func (s *Store) HeartbeatRunServer(ctx context.Context, serverID string) error {
	if !isUUID(serverID) {
		return fmt.Errorf("%w run server %q: not a UUID", ErrInvalid, serverID)
	}
	return heartbeat(ctx, s.pool, serverID)
}

// execer is a pool or a transaction.
type execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

func heartbeat(ctx context.Context, q execer, serverID string) error {
	if _, err := q.Exec(ctx, "INSERT INTO run_servers (id) VALUES ($1) ON CONFLICT (id) DO UPDATE SET last_seen = now()", serverID); err != nil {
		return fmt.Errorf("recording that run server %s is alive: %w", serverID, err)
	}
	return nil
}

// MarkLostRuns ends as lost every running run whose server
// (NewRun.ServerID) has not been seen (HeartbeatRunServer, CreateRun)
// within lostAfter, by the database's clock: status RunLost, no exit
// status, reason LostRunReason, finished now; the quota stops counting
// them at once. It returns the runs it ended. It is one UPDATE, safe to
// call from every server at once: a run is ended by one call only, and a
// run that ends meanwhile through FinishRun keeps that end. Runs without
// a server are left alone. Each run it ends is audited in the same
// statement (RunEndAction, ended RunEndLost, under PlatformActor).
// Servers not seen within lostAfter that run nothing any more are
// forgotten. The error wraps ErrInvalid when lostAfter is not positive.
func (s *Store) MarkLostRuns(ctx context.Context, lostAfter time.Duration) ([]Run, error) {
	if lostAfter <= 0 {
		return nil, fmt.Errorf("%w lost-run deadline %s: want more than 0", ErrInvalid, lostAfter)
	}
	rows, err := s.pool.Query(ctx, "WITH r AS (UPDATE runs SET status = 'lost', reason = $2, finished_at = now() "+
		"WHERE status = 'running' AND server_id IS NOT NULL AND NOT EXISTS "+
		"(SELECT 1 FROM run_servers s WHERE s.id = runs.server_id AND s.last_seen > now() - $1::interval) RETURNING *), "+
		"a AS (INSERT INTO audit_log (tenant_id, actor, action, target, details) SELECT r.tenant_id, $3, $4, r.app, "+runEndDetails("$5")+" FROM r) "+
		"SELECT "+runColumns+" FROM r ORDER BY number",
		lostAfter, LostRunReason, PlatformActor, RunEndAction, string(RunEndLost))
	if err != nil {
		return nil, fmt.Errorf("marking lost runs: %w", err)
	}
	lost, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Run, error) { return scanRun(row) })
	if err != nil {
		return nil, fmt.Errorf("marking lost runs: %w", err)
	}
	if _, err := s.pool.Exec(ctx, "DELETE FROM run_servers s WHERE s.last_seen <= now() - $1::interval AND NOT EXISTS "+
		"(SELECT 1 FROM runs WHERE runs.server_id = s.id AND runs.status = 'running')", lostAfter); err != nil {
		return lost, fmt.Errorf("forgetting run servers gone: %w", err)
	}
	return lost, nil
}
