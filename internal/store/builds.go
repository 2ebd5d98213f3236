package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"bex.co/bex/internal/steptime"
)

// BuildStatus is where a build stands.
type BuildStatus string

// The states of a build. A build starts running and ends once, succeeded or
// failed; it never changes afterwards.
const (
	BuildRunning   BuildStatus = "running"
	BuildSucceeded BuildStatus = "succeeded"
	BuildFailed    BuildStatus = "failed"
)

const (
	// defaultBuildLimit is how many builds ListBuilds returns when not told.
	defaultBuildLimit = 50
	// maxListLimit caps the limits of ListBuilds, ListReleases and BuildLogs.
	maxListLimit = 1000
	// buildLogsChannel is the NOTIFY channel on which AppendBuildLog and
	// FinishBuild announce a change; the payload is the build's ID.
	buildLogsChannel = "bex_build_logs"
)

// Build is one run of the builder over one push of an app.
type Build struct {
	ID       string `json:"id"`
	TenantID string `json:"tenantID"`
	App      string `json:"app"`
	// Number is 1, 2, 3, ... per app.
	Number int         `json:"number"`
	Commit string      `json:"commit,omitempty"`
	Status BuildStatus `json:"status"`
	// Stack is the stack the builder used, once known.
	Stack string `json:"stack,omitempty"`
	// Image is the image built, by digest; set when the build succeeded.
	Image string `json:"image,omitempty"`
	// Error says why the build failed, for the tenant.
	Error string `json:"error,omitempty"`
	// Timings are the push's steps and their time, in the order they
	// ran, as the pipeline recorded them when the build finished.
	Timings []steptime.Step `json:"timings,omitempty"`
	// LogLines is the seq of the build's last log line (0: none yet).
	LogLines   int64      `json:"logLines"`
	StartedAt  time.Time  `json:"startedAt"`
	FinishedAt *time.Time `json:"finishedAt,omitempty"`
}

// Done reports whether the build has ended.
func (b Build) Done() bool { return b.Status != BuildRunning }

// NewBuild is what CreateBuild needs.
type NewBuild struct {
	TenantID string
	App      string
	// Commit is the commit being built; optional.
	Commit string
	// Stack is the stack, when known before the build starts; optional.
	Stack string
	// Quota, when set, is checked before the build is recorded: a build
	// beyond it is refused with a *QuotaError and nothing is recorded.
	Quota *BuildQuota
}

// BuildResult is how a build ended, for FinishBuild.
type BuildResult struct {
	// Status is BuildSucceeded or BuildFailed.
	Status BuildStatus
	// Stack is the stack used; empty keeps the one recorded.
	Stack string
	// Image is the image built, by digest; required for BuildSucceeded and
	// refused for BuildFailed.
	Image string
	// Error says why the build failed; empty for BuildSucceeded.
	Error string
	// Timings are the push's steps so far (at most maxTimings are kept).
	Timings []steptime.Step
}

// maxTimings bounds the steps a build record keeps.
const maxTimings = 32

// BuildLogLine is one line of a build's output.
type BuildLogLine struct {
	// Seq is 1, 2, 3, ... per build.
	Seq  int64     `json:"seq"`
	Line string    `json:"line"`
	At   time.Time `json:"at"`
}

const buildColumns = "id, tenant_id, app, number, commit, status, stack, image, error, timings, log_lines, started_at, finished_at"

func scanBuild(row pgx.Row) (Build, error) {
	var b Build
	err := row.Scan(&b.ID, &b.TenantID, &b.App, &b.Number, &b.Commit, &b.Status, &b.Stack, &b.Image, &b.Error,
		&b.Timings, &b.LogLines, &b.StartedAt, &b.FinishedAt)
	if len(b.Timings) == 0 {
		b.Timings = nil
	}
	return b, err
}

// CreateBuild records a running build of an app and gives it the app's next
// build number. Concurrent calls for one app get distinct, consecutive
// numbers. The error wraps ErrInvalid when the app is not named,
// ErrNotFound when the tenant does not exist and ErrQuotaExceeded when
// nb.Quota refuses the build; concurrent calls for one tenant are checked
// one at a time, so they cannot pass a quota together that only one fits.
func (s *Store) CreateBuild(ctx context.Context, nb NewBuild) (Build, error) {
	if nb.App == "" {
		return Build{}, fmt.Errorf("%w build: the app is not named", ErrInvalid)
	}
	if !isUUID(nb.TenantID) {
		return Build{}, fmt.Errorf("tenant %q: %w", nb.TenantID, ErrNotFound)
	}
	var b Build
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if nb.Quota != nil {
			if err := checkBuildQuota(ctx, tx, nb.TenantID, *nb.Quota); err != nil {
				return err
			}
		}
		number, err := nextAppNumber(ctx, tx, nb.TenantID, nb.App, "last_build")
		if err != nil {
			return err
		}
		b, err = scanBuild(tx.QueryRow(ctx,
			"INSERT INTO builds (tenant_id, app, number, commit, stack) VALUES ($1, $2, $3, $4, $5) RETURNING "+buildColumns,
			nb.TenantID, nb.App, number, nb.Commit, nb.Stack))
		return err
	})
	if _, ok := constraintViolated(err, codeForeignKeyViolation); ok {
		return Build{}, fmt.Errorf("tenant %s: %w", nb.TenantID, ErrNotFound)
	}
	if errors.Is(err, ErrQuotaExceeded) {
		return Build{}, err
	}
	if err != nil {
		return Build{}, fmt.Errorf("creating build of %s: %w", nb.App, err)
	}
	return b, nil
}

// nextAppNumber takes the next number from the app's counter column
// (last_build or last_release) in tx. The counter row stays locked until tx
// ends, which serialises allocations for one app.
func nextAppNumber(ctx context.Context, tx pgx.Tx, tenantID, app, column string) (int, error) {
	var n int
	err := tx.QueryRow(ctx,
		"INSERT INTO app_counters AS c (tenant_id, app, "+column+") VALUES ($1, $2, 1) "+
			"ON CONFLICT (tenant_id, app) DO UPDATE SET "+column+" = c."+column+" + 1 RETURNING "+column,
		tenantID, app).Scan(&n)
	return n, err
}

// AppendBuildLog appends lines to a running build's log, numbering them on
// from the last, and wakes the readers that follow it. Concurrent calls for
// one build do not interleave within a call. A line may hold anything but
// is stored without its trailing newline, cut at MaxBuildLogLineBytes. Only
// the last Limits.BuildLogLines lines are kept: past that, each append
// deletes the oldest, and the line before the first kept one (its seq
// taken from the last dropped) says how many were dropped and why. The
// error wraps ErrNotFound when
// the build does not exist and ErrConflict when it has finished: a builder
// writes every line before FinishBuild.
func (s *Store) AppendBuildLog(ctx context.Context, buildID string, lines ...string) error {
	if !isUUID(buildID) {
		return fmt.Errorf("build %q: %w", buildID, ErrNotFound)
	}
	if len(lines) == 0 {
		return nil
	}
	clean := make([]string, len(lines))
	for i, l := range lines {
		clean[i] = cleanLogLine(l)
	}
	keep := int64(s.limits.BuildLogLines)
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var last int64
		var status BuildStatus
		err := tx.QueryRow(ctx,
			"UPDATE builds SET log_lines = log_lines + $2 WHERE id = $1 RETURNING log_lines, status",
			buildID, len(clean)).Scan(&last, &status)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("build %s: %w", buildID, ErrNotFound)
		}
		if err != nil {
			return err
		}
		if status != BuildRunning {
			return fmt.Errorf("build %s has %s, its log is closed: %w", buildID, status, ErrConflict)
		}
		first := last - int64(len(clean)) + 1
		if _, err := tx.Exec(ctx,
			"INSERT INTO build_logs (build_id, seq, line) SELECT $1, $2 + n - 1, line FROM unnest($3::text[]) WITH ORDINALITY AS l(line, n)",
			buildID, first, clean); err != nil {
			return err
		}
		if last > keep {
			// Keep the tail: the oldest lines go, and the line before the
			// kept ones says so (it replaces the last line dropped, so seq
			// stays dense from there on).
			notice := fmt.Sprintf("[bex] The first %d lines of this build's log were dropped: a build keeps its last %d lines.",
				last-keep, keep)
			if _, err := tx.Exec(ctx, "DELETE FROM build_logs WHERE build_id = $1 AND seq <= $2", buildID, last-keep); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, "INSERT INTO build_logs (build_id, seq, line) VALUES ($1, $2, $3)",
				buildID, last-keep, notice); err != nil {
				return err
			}
		}
		_, err = tx.Exec(ctx, "SELECT pg_notify($1, $2)", buildLogsChannel, buildID)
		return err
	})
	if err != nil {
		if errors.Is(err, ErrNotFound) || errors.Is(err, ErrConflict) {
			return err
		}
		return fmt.Errorf("appending to the log of build %s: %w", buildID, err)
	}
	return nil
}

// cleanLogLine makes l storable: without its line ending and NUL bytes,
// valid UTF-8, at most MaxBuildLogLineBytes long (a longer one is cut, and
// says so).
func cleanLogLine(l string) string {
	l = strings.ToValidUTF8(strings.ReplaceAll(strings.TrimRight(l, "\r\n"), "\x00", ""), "\uFFFD")
	if len(l) <= MaxBuildLogLineBytes {
		return l
	}
	cut := MaxBuildLogLineBytes
	for cut > 0 && !utf8.RuneStart(l[cut]) {
		cut--
	}
	return fmt.Sprintf("%s [bex: line cut: a log line keeps %d bytes]", l[:cut], MaxBuildLogLineBytes)
}

// FinishBuild ends a running build with its result and wakes the readers
// that follow its log. The error wraps ErrInvalid when the result is not
// succeeded with an image or failed without one, ErrNotFound when the build
// does not exist, and ErrConflict when it has finished already.
func (s *Store) FinishBuild(ctx context.Context, buildID string, r BuildResult) (Build, error) {
	switch {
	case r.Status == BuildSucceeded && r.Image == "":
		return Build{}, fmt.Errorf("%w build result: a succeeded build needs its image", ErrInvalid)
	case r.Status == BuildFailed && r.Image != "":
		return Build{}, fmt.Errorf("%w build result: a failed build has no image", ErrInvalid)
	case r.Status != BuildSucceeded && r.Status != BuildFailed:
		return Build{}, fmt.Errorf("%w build result: status %q is neither %q nor %q", ErrInvalid, r.Status, BuildSucceeded, BuildFailed)
	}
	if !isUUID(buildID) {
		return Build{}, fmt.Errorf("build %q: %w", buildID, ErrNotFound)
	}
	timings := r.Timings
	if len(timings) > maxTimings {
		timings = timings[:maxTimings]
	}
	if timings == nil {
		timings = []steptime.Step{}
	}
	var b Build
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		b, err = scanBuild(tx.QueryRow(ctx,
			"UPDATE builds SET status = $2, stack = coalesce(nullif($3, ''), stack), image = $4, error = $5, timings = $6, finished_at = now() "+
				"WHERE id = $1 AND status = 'running' RETURNING "+buildColumns,
			buildID, string(r.Status), r.Stack, r.Image, r.Error, timings))
		if errors.Is(err, pgx.ErrNoRows) {
			if _, gerr := s.GetBuild(ctx, buildID); gerr != nil {
				return gerr
			}
			return fmt.Errorf("build %s has finished already: %w", buildID, ErrConflict)
		}
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, "SELECT pg_notify($1, $2)", buildLogsChannel, buildID)
		return err
	})
	if err != nil {
		if errors.Is(err, ErrNotFound) || errors.Is(err, ErrConflict) {
			return Build{}, err
		}
		return Build{}, fmt.Errorf("finishing build %s: %w", buildID, err)
	}
	return b, nil
}

// GetBuild returns the build with the given ID, or an error wrapping
// ErrNotFound.
func (s *Store) GetBuild(ctx context.Context, id string) (Build, error) {
	return getBuild(ctx, s.pool, id)
}

// querier is what reads need of a pool or of one connection.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

func getBuild(ctx context.Context, q querier, id string) (Build, error) {
	if !isUUID(id) {
		return Build{}, fmt.Errorf("build %q: %w", id, ErrNotFound)
	}
	b, err := scanBuild(q.QueryRow(ctx, "SELECT "+buildColumns+" FROM builds WHERE id = $1", id))
	if errors.Is(err, pgx.ErrNoRows) {
		return Build{}, fmt.Errorf("build %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return Build{}, fmt.Errorf("reading build %s: %w", id, err)
	}
	return b, nil
}

// GetBuildByNumber returns the tenant's build number of app; number 0 means
// the latest build. The error wraps ErrNotFound when there is none.
func (s *Store) GetBuildByNumber(ctx context.Context, tenantID, app string, number int) (Build, error) {
	return getNumbered(ctx, s, "builds", buildColumns, scanBuild, tenantID, app, number, "build "+strconv.Itoa(number))
}

// LatestBuildOf returns the newest build of the app of the tenant named
// tenantName, in one query (the App controller asks at every reconcile);
// the error wraps ErrNotFound when the tenant or its app has no build.
func (s *Store) LatestBuildOf(ctx context.Context, tenantName, app string) (Build, error) {
	b, err := scanBuild(s.pool.QueryRow(ctx, "SELECT "+buildColumns+" FROM builds"+
		" WHERE tenant_id = (SELECT id FROM tenants WHERE name = $1) AND app = $2 ORDER BY number DESC LIMIT 1", tenantName, app))
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return Build{}, fmt.Errorf("app %s of tenant %s has no builds: %w", app, tenantName, ErrNotFound)
	case err != nil:
		return Build{}, fmt.Errorf("reading the latest build of %s: %w", app, err)
	}
	return b, nil
}

// getNumbered reads the row of a per-app numbered table (builds, releases)
// with the given number, or the highest when number is 0. what names the
// row in errors ("build 3", "release v3").
func getNumbered[T any](ctx context.Context, s *Store, table, columns string, scan func(pgx.Row) (T, error),
	tenantID, app string, number int, what string) (T, error) {
	var zero T
	if !isUUID(tenantID) {
		return zero, fmt.Errorf("%s of %s: %w", what, app, ErrNotFound)
	}
	query, args := "SELECT "+columns+" FROM "+table+" WHERE tenant_id = $1 AND app = $2 AND number = $3", []any{tenantID, app, number}
	if number == 0 {
		query, args = "SELECT "+columns+" FROM "+table+" WHERE tenant_id = $1 AND app = $2 ORDER BY number DESC LIMIT 1", args[:2]
	}
	row, err := scan(s.pool.QueryRow(ctx, query, args...))
	switch {
	case errors.Is(err, pgx.ErrNoRows) && number == 0:
		return zero, fmt.Errorf("app %s has no %s: %w", app, table, ErrNotFound)
	case errors.Is(err, pgx.ErrNoRows):
		return zero, fmt.Errorf("%s of %s: %w", what, app, ErrNotFound)
	case err != nil:
		return zero, fmt.Errorf("reading %s of %s: %w", what, app, err)
	}
	return row, nil
}

// ListBuilds returns the tenant's builds of app (every app when app is
// empty), newest first, at most limit of them (50 when limit is zero, at
// most 1000).
func (s *Store) ListBuilds(ctx context.Context, tenantID, app string, limit int) ([]Build, error) {
	if !isUUID(tenantID) {
		return nil, nil
	}
	limit = clampLimit(limit, defaultBuildLimit)
	query, args := "SELECT "+buildColumns+" FROM builds WHERE tenant_id = $1", []any{tenantID}
	if app != "" {
		query, args = query+" AND app = $2", append(args, app)
	}
	query += " ORDER BY started_at DESC, app, number DESC LIMIT " + strconv.Itoa(limit)
	rows, err := s.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("listing builds: %w", err)
	}
	builds, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Build, error) { return scanBuild(row) })
	if err != nil {
		return nil, fmt.Errorf("listing builds: %w", err)
	}
	return builds, nil
}

// BuildLogs returns the build's log lines after seq afterSeq (0: from the
// first), in order, at most 1000 at a time: call again with the last seq
// for more. It returns no lines and no error for a build without lines, and
// an error wrapping ErrNotFound only when the ID is malformed; check the
// build with GetBuild.
func (s *Store) BuildLogs(ctx context.Context, buildID string, afterSeq int64) ([]BuildLogLine, error) {
	return buildLogs(ctx, s.pool, buildID, afterSeq)
}

func buildLogs(ctx context.Context, q querier, buildID string, afterSeq int64) ([]BuildLogLine, error) {
	if !isUUID(buildID) {
		return nil, fmt.Errorf("build %q: %w", buildID, ErrNotFound)
	}
	rows, err := q.Query(ctx,
		"SELECT seq, line, at FROM build_logs WHERE build_id = $1 AND seq > $2 ORDER BY seq LIMIT "+strconv.Itoa(maxListLimit),
		buildID, afterSeq)
	if err != nil {
		return nil, fmt.Errorf("reading the log of build %s: %w", buildID, err)
	}
	lines, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (BuildLogLine, error) {
		var l BuildLogLine
		err := row.Scan(&l.Seq, &l.Line, &l.At)
		return l, err
	})
	if err != nil {
		return nil, fmt.Errorf("reading the log of build %s: %w", buildID, err)
	}
	return lines, nil
}

// followPoll bounds how long a follower waits for a notification before it
// reads the table again anyway, in case one was missed (while the
// notifier's connection was down, say). Notifications make the common case
// immediate.
const followPoll = 5 * time.Second

// BuildLogFollower is a follow of one build's log that has started: it
// receives the notifications about the build. Get one from
// StartFollowingBuildLog, run it with Follow, and Close it.
type BuildLogFollower struct {
	s       *Store
	buildID string
	sub     *subscription
}

// StartFollowingBuildLog starts following the build's log, so that callers
// can tell a stream that cannot start (and answer an error) from one that
// has. Its followers share one connection of the process that LISTENs for
// every build (they hold none of their own), and read the table on
// followReaderConns connections apart from the store's pool, so that
// followers never starve the writers they wait for. The error wraps
// ErrNotFound when the build does not exist; any other error means the
// store cannot follow logs now (its database is unreachable or refuses
// connections).
func (s *Store) StartFollowingBuildLog(ctx context.Context, buildID string) (*BuildLogFollower, error) {
	if _, err := getBuild(ctx, s.followReaders, buildID); err != nil {
		return nil, err
	}
	sub, err := s.notifier.subscribe(ctx, buildID)
	if err != nil {
		return nil, fmt.Errorf("following build %s: %w", buildID, err)
	}
	return &BuildLogFollower{s: s, buildID: buildID, sub: sub}, nil
}

// Close ends the follow; it may be called more than once.
func (f *BuildLogFollower) Close() { f.sub.close() }

// Follow calls emit with each line of the build's log after seq afterSeq,
// in order, as lines are appended, and returns the build once it has
// finished and emit has seen its every line. It stops with ctx's error when
// ctx ends and with emit's error when emit fails. A follower that falls
// behind misses no line: whenever it wakes it reads the table on from the
// last line it emitted. Follow may be called once.
func (f *BuildLogFollower) Follow(ctx context.Context, afterSeq int64, emit func(BuildLogLine) error) (Build, error) {
	q := f.s.followReaders
	seq := afterSeq
	for {
		// Take the pending wake-up before reading: a notification that
		// comes during the read leaves a new one.
		select {
		case <-f.sub.wake:
		default:
		}
		// Read the build before its lines: a build seen finished has all
		// its lines stored already.
		b, err := getBuild(ctx, q, f.buildID)
		if err != nil {
			return Build{}, err
		}
		for {
			lines, err := buildLogs(ctx, q, f.buildID, seq)
			if err != nil {
				return Build{}, err
			}
			for _, l := range lines {
				if err := emit(l); err != nil {
					return Build{}, err
				}
				seq = l.Seq
			}
			if len(lines) < maxListLimit {
				break
			}
		}
		if b.Done() {
			return b, nil
		}
		t := time.NewTimer(followPoll)
		select {
		case <-ctx.Done():
			t.Stop()
			return Build{}, ctx.Err()
		case <-f.sub.wake:
		case <-t.C:
		}
		t.Stop()
	}
}

// FollowBuildLogs is StartFollowingBuildLog and Follow in one call.
func (s *Store) FollowBuildLogs(ctx context.Context, buildID string, afterSeq int64, emit func(BuildLogLine) error) (Build, error) {
	f, err := s.StartFollowingBuildLog(ctx, buildID)
	if err != nil {
		return Build{}, err
	}
	defer f.Close()
	return f.Follow(ctx, afterSeq, emit)
}

// clampLimit returns limit, or def when it is zero or negative, and never
// more than maxListLimit.
func clampLimit(limit, def int) int {
	if limit <= 0 {
		limit = def
	}
	return min(limit, maxListLimit)
}
