package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// defaultReleaseLimit is how many releases ListReleases returns when not
// told.
const defaultReleaseLimit = 50

// Release is one immutable entry of an app's release history: an image and
// the configuration it ran with, or tried to. Rollbacks and configuration
// changes record new releases; a rollout that failed records a failed one
// (Status), which never runs. The database refuses to change or remove a
// release, except to mark it pruned (PruneReleases) once.
type Release struct {
	ID       string `json:"id"`
	TenantID string `json:"tenantID"`
	App      string `json:"app"`
	// Number is v1, v2, ... per app, without gaps.
	Number int `json:"number"`
	// BuildID is the build that made the image: for a rollback or a config
	// release, the build of the release whose image it runs again; empty
	// when that is not known.
	BuildID string `json:"buildID,omitempty"`
	// Image is the image by digest: <repository>@sha256:<hex>.
	Image string `json:"image"`
	// Config is the environment, by variable name.
	Config map[string]ConfigValue `json:"config"`
	// Kind says what made the release: a push, a rollback or a config
	// change.
	Kind ReleaseKind `json:"kind"`
	// RollbackTo is, for a rollback, the number of the release whose image
	// and config it runs again; 0 for the other kinds.
	RollbackTo int `json:"rollbackTo,omitempty"`
	// Description says why the release exists, for people: "Deploy
	// abc1234", "Rollback to v2". Programs read Kind.
	Description string `json:"description"`
	// Status says whether the release went out: succeeded, or failed when
	// its rollout failed and what served before kept serving.
	Status ReleaseStatus `json:"status"`
	// Failure says why a failed release did not go out, in the words the
	// push or the API answered then; empty for a succeeded one.
	Failure string `json:"failure,omitempty"`
	// CreatedBy is who made it: a token's or user's name, or a component.
	CreatedBy string    `json:"createdBy"`
	CreatedAt time.Time `json:"createdAt"`
	// PrunedAt is when the release's artifacts (its unpacked directory,
	// its image) were deleted past the platform's release retention; nil
	// while they are kept. A pruned release cannot run again.
	PrunedAt *time.Time `json:"prunedAt,omitempty"`
	// PrunedRetention is the retention that pruned it: how many releases
	// of an app the platform kept then. 0 while kept.
	PrunedRetention int `json:"prunedRetention,omitempty"`
}

// ReleaseKind is what made a release. Every release has one of the kinds
// below; the database refuses any other (migration 0021).
type ReleaseKind string

// The kinds of release. Scaling, restarts, maintenance mode and app
// settings record no release, so they have no kind.
const (
	// ReleaseKindDeploy is a push: the image a build made, with the App's
	// environment.
	ReleaseKindDeploy ReleaseKind = "deploy"
	// ReleaseKindRollback runs an earlier release's image and config
	// again; the release's RollbackTo says which.
	ReleaseKindRollback ReleaseKind = "rollback"
	// ReleaseKindConfig runs the current release's image with the App's
	// changed environment (plain or secret variables set or unset).
	ReleaseKindConfig ReleaseKind = "config"
)

// ReleaseStatus says whether a release went out. The database refuses any
// other than the two below (migration 0027) and any change of it.
type ReleaseStatus string

// The statuses of a release. A release is recorded once its rollout ended,
// so there is no pending one.
const (
	// ReleaseSucceeded: the release went out; it served, and may serve
	// again (be rolled back to) while its artifacts are kept.
	ReleaseSucceeded ReleaseStatus = "succeeded"
	// ReleaseFailed: the release's rollout failed (its release phase, or
	// its instances never became healthy); what served kept serving. It
	// holds its number, says why in Failure, and never runs.
	ReleaseFailed ReleaseStatus = "failed"
)

// ReleaseKinds are the kinds of release, in the order above.
func ReleaseKinds() []ReleaseKind {
	return []ReleaseKind{ReleaseKindDeploy, ReleaseKindRollback, ReleaseKindConfig}
}

// Known reports whether k is one of ReleaseKinds.
func (k ReleaseKind) Known() bool { return slices.Contains(ReleaseKinds(), k) }

// ReleaseStatuses are the statuses of a release, in the order above.
func ReleaseStatuses() []ReleaseStatus {
	return []ReleaseStatus{ReleaseSucceeded, ReleaseFailed}
}

// Known reports whether st is one of ReleaseStatuses.
func (st ReleaseStatus) Known() bool { return slices.Contains(ReleaseStatuses(), st) }

// Runnable returns nil when the release can run again (be rolled back to),
// a *FailedError when it never went out, and a *PrunedError when its
// artifacts were pruned.
func (r Release) Runnable() error {
	switch {
	case r.Status == ReleaseFailed:
		return &FailedError{Number: r.Number, Failure: r.Failure}
	case r.PrunedAt != nil:
		return &PrunedError{Number: r.Number, Retention: r.PrunedRetention}
	}
	return nil
}

// FailedError says that a release cannot run: its rollout failed, so it
// never went out. It is an ErrInvalid.
type FailedError struct {
	// Number is the release's.
	Number int
	// Failure is why its rollout failed.
	Failure string
	// Before is the newest release before it that went out, 0 when there
	// is none; set by the store when it refuses a rollback (RollbackTarget
	// finds one).
	Before int
}

func (e *FailedError) Error() string {
	msg := fmt.Sprintf("v%d failed (%s)", e.Number, e.Failure)
	if e.Before > 0 {
		return fmt.Sprintf("%s; roll back to a release that went out, e.g. v%d", msg, e.Before)
	}
	return msg + "; roll back to a release that went out"
}

// Is makes a FailedError an ErrInvalid.
func (e *FailedError) Is(target error) bool { return target == ErrInvalid }

// ParseReleaseKinds reads a comma-separated list of release kinds, such as
// "deploy,rollback", as a filter for ListReleases: blanks around a kind are
// ignored, a kind named twice counts once, and "" is no filter (nil). The
// error wraps ErrInvalid and names the kinds when one is not one of
// ReleaseKinds or is empty ("deploy,,config").
func ParseReleaseKinds(list string) ([]ReleaseKind, error) {
	return parseReleaseFilter(list, "kind", "kinds", ReleaseKinds())
}

// ParseReleaseStatuses reads a comma-separated list of release statuses,
// such as "failed", as a filter for ListReleases, as ParseReleaseKinds
// reads kinds. The error wraps ErrInvalid and names the statuses when one
// is not one of ReleaseStatuses or is empty.
func ParseReleaseStatuses(list string) ([]ReleaseStatus, error) {
	return parseReleaseFilter(list, "status", "statuses", ReleaseStatuses())
}

// parseReleaseFilter reads list, values of known separated by commas, for
// ParseReleaseKinds and ParseReleaseStatuses; what and whats name one
// value and several in errors.
func parseReleaseFilter[T ~string](list, what, whats string, known []T) ([]T, error) {
	if strings.TrimSpace(list) == "" {
		return nil, nil
	}
	var values []T
	for name := range strings.SplitSeq(list, ",") {
		v := T(strings.TrimSpace(name))
		switch {
		case v == "":
			return nil, fmt.Errorf("%w release %s %q: an empty %s; give %s separated by commas, from %s", ErrInvalid, whats, list, what, whats, nameList(known))
		case !slices.Contains(known, v):
			return nil, fmt.Errorf("%w release %s %q: want one of %s", ErrInvalid, what, v, nameList(known))
		case !slices.Contains(values, v):
			values = append(values, v)
		}
	}
	return values, nil
}

// kindList is ReleaseKinds for an error message: "deploy, rollback, config".
func kindList() string { return nameList(ReleaseKinds()) }

// nameList is values for an error message, separated by commas.
func nameList[T ~string](values []T) string { return strings.Join(stringsOf(values), ", ") }

// stringsOf is values as strings, for a query's text[] parameter.
func stringsOf[T ~string](values []T) []string {
	names := make([]string, len(values))
	for i, v := range values {
		names[i] = string(v)
	}
	return names
}

// PrunedError says that a release cannot run again: its artifacts were
// pruned past the release retention. It is an ErrInvalid.
type PrunedError struct {
	// Number is the release's.
	Number int
	// Retention is how many releases of an app the platform kept when it
	// pruned this one.
	Retention int
}

func (e *PrunedError) Error() string {
	return fmt.Sprintf("release v%d was pruned: %s", e.Number, RetentionRule(e.Retention))
}

// RetentionRule says, for a user, what a retention of keep releases means.
func RetentionRule(keep int) string {
	if keep == 1 {
		return "the platform keeps the last release of an app"
	}
	return fmt.Sprintf("the platform keeps the last %d releases of an app", keep)
}

// Is makes a PrunedError an ErrInvalid.
func (e *PrunedError) Is(target error) bool { return target == ErrInvalid }

// ConfigValue is one environment variable of a release: a literal value or
// a reference to a key of a Secret in the tenant's namespace, exactly one of
// the two. Secret values are never stored in Postgres: a release records
// where the value is, and a rollout reads the Secret as it is then.
type ConfigValue struct {
	Value        *string    `json:"value,omitempty"`
	SecretKeyRef *SecretRef `json:"secretKeyRef,omitempty"`
}

// SecretRef names a key of a Secret in the tenant's namespace.
type SecretRef struct {
	Name string `json:"name"`
	Key  string `json:"key"`
}

// NewRelease is what CreateRelease needs.
type NewRelease struct {
	TenantID string
	App      string
	// Kind says what made the release; required, one of ReleaseKinds.
	Kind ReleaseKind
	// RollbackTo is the release a rollback runs again: required for
	// ReleaseKindRollback, an earlier release of the app; 0 otherwise.
	RollbackTo int
	// BuildID is the build that made Image; optional.
	BuildID string
	// Image is the image by digest; required.
	Image string
	// Config is the environment; nil means none.
	Config map[string]ConfigValue
	// Description says why; required ("Deploy abc1234").
	Description string
	// CreatedBy is who asked; required.
	CreatedBy string
	// Failure, when not empty, records the release as failed: its rollout
	// failed for this reason (names only, never a secret's value), and
	// what served before keeps serving. Empty records a succeeded release.
	Failure string
}

const releaseColumns = "id, tenant_id, app, number, kind, rollback_to, build_id, image, config, description, created_by, created_at, pruned_at, pruned_retention, status, failure"

func scanRelease(row pgx.Row) (Release, error) {
	var r Release
	var buildID *string
	var config []byte
	var prunedRetention, rollbackTo *int
	var failure *string
	err := row.Scan(&r.ID, &r.TenantID, &r.App, &r.Number, &r.Kind, &rollbackTo, &buildID, &r.Image, &config, &r.Description, &r.CreatedBy, &r.CreatedAt,
		&r.PrunedAt, &prunedRetention, &r.Status, &failure)
	if err != nil {
		return r, err
	}
	r.BuildID = orEmpty(buildID)
	r.Failure = orEmpty(failure)
	if rollbackTo != nil {
		r.RollbackTo = *rollbackTo
	}
	if prunedRetention != nil {
		r.PrunedRetention = *prunedRetention
	}
	if err := json.Unmarshal(config, &r.Config); err != nil {
		return r, fmt.Errorf("decoding the config of release %d of %s: %w", r.Number, r.App, err)
	}
	if r.Config == nil {
		r.Config = map[string]ConfigValue{}
	}
	return r, nil
}

// CreateRelease records a release of an app with the app's next number:
// succeeded, or failed when nr.Failure says why its rollout failed.
// Concurrent calls for one app get distinct, consecutive numbers. The error
// wraps ErrInvalid when a required field is missing or a config value is not
// exactly one of a value and a secret reference, when the kind is not one
// of ReleaseKinds, or when a rollback names no release to run again, names
// a failed one, or another kind names one; it wraps ErrNotFound when the tenant, the build
// or the release rolled back to does not exist or the build is of another
// app.
func (s *Store) CreateRelease(ctx context.Context, nr NewRelease) (Release, error) {
	switch {
	case nr.App == "":
		return Release{}, fmt.Errorf("%w release: the app is not named", ErrInvalid)
	case nr.Kind == "":
		return Release{}, fmt.Errorf("%w release of %s: it does not say its kind (one of %s)", ErrInvalid, nr.App, kindList())
	case !nr.Kind.Known():
		return Release{}, fmt.Errorf("%w release of %s: unknown kind %q (want one of %s)", ErrInvalid, nr.App, nr.Kind, kindList())
	case nr.Kind == ReleaseKindRollback && nr.RollbackTo < 1:
		return Release{}, fmt.Errorf("%w release of %s: a rollback names the release it runs again", ErrInvalid, nr.App)
	case nr.Kind != ReleaseKindRollback && nr.RollbackTo != 0:
		return Release{}, fmt.Errorf("%w release of %s: a %s release rolls back to no release (v%d given)", ErrInvalid, nr.App, nr.Kind, nr.RollbackTo)
	case nr.Image == "":
		return Release{}, fmt.Errorf("%w release of %s: it has no image", ErrInvalid, nr.App)
	case strings.TrimSpace(nr.Description) == "":
		return Release{}, fmt.Errorf("%w release of %s: it has no description", ErrInvalid, nr.App)
	case nr.CreatedBy == "":
		return Release{}, fmt.Errorf("%w release of %s: it does not say who made it", ErrInvalid, nr.App)
	}
	for name, v := range nr.Config {
		if (v.Value == nil) == (v.SecretKeyRef == nil) {
			return Release{}, fmt.Errorf("%w release config %s: exactly one of a value and a secret reference", ErrInvalid, name)
		}
		if v.SecretKeyRef != nil && (v.SecretKeyRef.Name == "" || v.SecretKeyRef.Key == "") {
			return Release{}, fmt.Errorf("%w release config %s: the secret reference needs a name and a key", ErrInvalid, name)
		}
	}
	if !isUUID(nr.TenantID) {
		return Release{}, fmt.Errorf("tenant %q: %w", nr.TenantID, ErrNotFound)
	}
	if nr.BuildID != "" && !isUUID(nr.BuildID) {
		return Release{}, fmt.Errorf("build %q: %w", nr.BuildID, ErrNotFound)
	}
	config := nr.Config
	if config == nil {
		config = map[string]ConfigValue{}
	}
	configJSON, err := json.Marshal(config)
	if err != nil {
		return Release{}, fmt.Errorf("encoding release config: %w", err)
	}
	var rollbackTo *int
	if nr.RollbackTo != 0 {
		rollbackTo = &nr.RollbackTo
	}
	var r Release
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if nr.BuildID != "" {
			if err := existsOr(ctx, tx, fmt.Errorf("build %s of %s: %w", nr.BuildID, nr.App, ErrNotFound),
				"SELECT EXISTS (SELECT 1 FROM builds WHERE id = $1 AND tenant_id = $2 AND app = $3)",
				nr.BuildID, nr.TenantID, nr.App); err != nil {
				return err
			}
		}
		if nr.RollbackTo != 0 {
			// An existing release is an earlier one: numbers only grow.
			var status ReleaseStatus
			var failure *string
			err := tx.QueryRow(ctx, "SELECT status, failure FROM releases WHERE tenant_id = $1 AND app = $2 AND number = $3",
				nr.TenantID, nr.App, nr.RollbackTo).Scan(&status, &failure)
			switch {
			case errors.Is(err, pgx.ErrNoRows):
				return fmt.Errorf("release v%d of %s to roll back to: %w", nr.RollbackTo, nr.App, ErrNotFound)
			case err != nil:
				return err
			case status == ReleaseFailed:
				return &FailedError{Number: nr.RollbackTo, Failure: orEmpty(failure)}
			}
		}
		number, err := nextAppNumber(ctx, tx, nr.TenantID, nr.App, "last_release")
		if err != nil {
			return err
		}
		status := ReleaseSucceeded
		if nr.Failure != "" {
			status = ReleaseFailed
		}
		r, err = scanRelease(tx.QueryRow(ctx,
			"INSERT INTO releases (tenant_id, app, number, kind, rollback_to, build_id, image, config, description, created_by, status, failure) "+
				"VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) RETURNING "+releaseColumns,
			nr.TenantID, nr.App, number, string(nr.Kind), rollbackTo, nullable(nr.BuildID), nr.Image, string(configJSON), nr.Description, nr.CreatedBy,
			string(status), nullable(nr.Failure)))
		return err
	})
	if _, ok := constraintViolated(err, codeForeignKeyViolation); ok {
		return Release{}, fmt.Errorf("tenant %s: %w", nr.TenantID, ErrNotFound)
	}
	if err != nil {
		if errors.Is(err, ErrNotFound) || errors.Is(err, ErrInvalid) {
			return Release{}, err
		}
		return Release{}, fmt.Errorf("creating release of %s: %w", nr.App, err)
	}
	return r, nil
}

// existsOr runs query, a SELECT EXISTS, in tx and returns notFound when it
// answers false.
func existsOr(ctx context.Context, tx pgx.Tx, notFound error, query string, args ...any) error {
	var ok bool
	if err := tx.QueryRow(ctx, query, args...).Scan(&ok); err != nil {
		return err
	}
	if !ok {
		return notFound
	}
	return nil
}

// CreateRollbackRelease records a new release of app that runs the image
// and config of release number to, of kind ReleaseKindRollback, described
// "Rollback to v<to>". The error wraps ErrNotFound when there is no such
// release, and is a *FailedError when it failed or a *PrunedError when it
// was pruned (RunnableRelease).
func (s *Store) CreateRollbackRelease(ctx context.Context, tenantID, app string, to int, createdBy string) (Release, error) {
	target, err := s.RunnableRelease(ctx, tenantID, app, to)
	if err != nil {
		return Release{}, err
	}
	return s.CreateRelease(ctx, RollbackRelease(target, createdBy, ""))
}

// RollbackRelease is the NewRelease of a rollback to target made by
// createdBy: target's image, build and config again, described "Rollback
// to v<n>"; failed when failure is not empty.
func RollbackRelease(target Release, createdBy, failure string) NewRelease {
	return NewRelease{
		TenantID:    target.TenantID,
		App:         target.App,
		BuildID:     target.BuildID,
		Image:       target.Image,
		Config:      target.Config,
		Kind:        ReleaseKindRollback,
		RollbackTo:  target.Number,
		Description: "Rollback to v" + strconv.Itoa(target.Number),
		CreatedBy:   createdBy,
		Failure:     failure,
	}
}

// RunnableRelease returns release number of app when it can run again (be
// rolled back to). The error wraps ErrNotFound when there is no such
// release; it is a *FailedError, naming in Before the newest earlier
// release that can run, when the release failed, and a *PrunedError when
// it was pruned (Release.Runnable).
func (s *Store) RunnableRelease(ctx context.Context, tenantID, app string, number int) (Release, error) {
	r, err := s.GetRelease(ctx, tenantID, app, number)
	if err != nil {
		return Release{}, err
	}
	err = r.Runnable()
	var failed *FailedError
	if errors.As(err, &failed) {
		if before, err := s.previousRelease(ctx, tenantID, app, r.Number, true); err == nil {
			failed.Before = before.Number
		} else if !errors.Is(err, ErrNotFound) {
			return Release{}, err
		}
	}
	if err != nil {
		return Release{}, err
	}
	return r, nil
}

// GetRelease returns the tenant's release number of app, whatever its
// status; number 0 means the one with the highest number, which may be a
// failed one (its number is taken: the next release's is one more). The
// error wraps ErrNotFound when there is none.
func (s *Store) GetRelease(ctx context.Context, tenantID, app string, number int) (Release, error) {
	return getNumbered(ctx, s, "releases", releaseColumns, scanRelease, tenantID, app, number, "release v"+strconv.Itoa(number))
}

// LatestRelease returns the app's newest release that went out (a failed
// one never does), which is the current one once the runtime has rolled it
// out (the App's status.currentRelease says which runs). The error wraps
// ErrNotFound when the app has no such release.
func (s *Store) LatestRelease(ctx context.Context, tenantID, app string) (Release, error) {
	return s.previousRelease(ctx, tenantID, app, 0, false)
}

// PreviousRelease returns the newest release of app before number that
// went out: what served before it, skipping failed releases. The error
// wraps ErrNotFound when there is none.
func (s *Store) PreviousRelease(ctx context.Context, tenantID, app string, number int) (Release, error) {
	if number <= 1 {
		return Release{}, fmt.Errorf("app %s has no release before v%d: %w", app, number, ErrNotFound)
	}
	return s.previousRelease(ctx, tenantID, app, number, false)
}

// previousRelease is the newest succeeded release of app numbered below
// before (any when before is 0), and only among those not pruned when
// kept is set.
func (s *Store) previousRelease(ctx context.Context, tenantID, app string, before int, kept bool) (Release, error) {
	what := "release that went out"
	if before > 0 {
		what += " before v" + strconv.Itoa(before)
	}
	if !isUUID(tenantID) {
		return Release{}, fmt.Errorf("app %s has no %s: %w", app, what, ErrNotFound)
	}
	query := "SELECT " + releaseColumns + " FROM releases WHERE tenant_id = $1 AND app = $2 AND status = 'succeeded' " +
		"AND ($3 = 0 OR number < $3)"
	if kept {
		query += " AND pruned_at IS NULL"
	}
	r, err := scanRelease(s.pool.QueryRow(ctx, query+" ORDER BY number DESC LIMIT 1", tenantID, app, before))
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return Release{}, fmt.Errorf("app %s has no %s: %w", app, what, ErrNotFound)
	case err != nil:
		return Release{}, fmt.Errorf("reading the %s of %s: %w", what, app, err)
	}
	return r, nil
}

// CurrentRelease returns the release that serves the app: number current
// (the App's status.currentRelease) when it is set, otherwise the latest
// that went out (LatestRelease), which is the one a rollout is about to
// serve. The error wraps ErrNotFound when there is no such release.
func (s *Store) CurrentRelease(ctx context.Context, tenantID, app string, current int) (Release, error) {
	if current <= 0 {
		return s.LatestRelease(ctx, tenantID, app)
	}
	return s.GetRelease(ctx, tenantID, app, current)
}

// ReleaseFilter says which of an app's releases ListReleases returns. The
// zero value is the newest 50, of every kind and status.
type ReleaseFilter struct {
	// Kinds, when any, keeps only the releases of these kinds (one of
	// ReleaseKinds each).
	Kinds []ReleaseKind
	// Statuses, when any, keeps only the releases of these statuses (one
	// of ReleaseStatuses each).
	Statuses []ReleaseStatus
	// Before, when not 0, keeps only the releases numbered below it: the
	// page after one whose last release is Before. As release numbers
	// only grow, a page does not move when releases are made meanwhile.
	Before int
	// Limit is how many releases at most, counting only those kept: 50
	// when 0, at most 1000.
	Limit int
}

// ListReleases returns the tenant's releases of app that f keeps, failed
// ones too unless f says otherwise, newest first. The error wraps
// ErrInvalid when f.Before is negative, or when one of f.Kinds is not one
// of ReleaseKinds or one of f.Statuses not one of ReleaseStatuses.
func (s *Store) ListReleases(ctx context.Context, tenantID, app string, f ReleaseFilter) ([]Release, error) {
	if f.Before < 0 {
		return nil, fmt.Errorf("%w release number %d: want a positive one, or 0 for none", ErrInvalid, f.Before)
	}
	for _, k := range f.Kinds {
		if !k.Known() {
			return nil, fmt.Errorf("%w release kind %q: want one of %s", ErrInvalid, k, kindList())
		}
	}
	for _, st := range f.Statuses {
		if !st.Known() {
			return nil, fmt.Errorf("%w release status %q: want one of %s", ErrInvalid, st, nameList(ReleaseStatuses()))
		}
	}
	if !isUUID(tenantID) {
		return nil, nil
	}
	where, args := "tenant_id = $1 AND app = $2", []any{tenantID, app}
	if len(f.Kinds) > 0 {
		args = append(args, stringsOf(f.Kinds))
		where += fmt.Sprintf(" AND kind = ANY($%d)", len(args))
	}
	if len(f.Statuses) > 0 {
		args = append(args, stringsOf(f.Statuses))
		where += fmt.Sprintf(" AND status = ANY($%d)", len(args))
	}
	if f.Before > 0 {
		args = append(args, f.Before)
		where += fmt.Sprintf(" AND number < $%d", len(args))
	}
	rows, err := s.pool.Query(ctx,
		"SELECT "+releaseColumns+" FROM releases WHERE "+where+" ORDER BY number DESC LIMIT "+
			strconv.Itoa(clampLimit(f.Limit, defaultReleaseLimit)),
		args...)
	if err != nil {
		return nil, fmt.Errorf("listing releases of %s: %w", app, err)
	}
	releases, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Release, error) { return scanRelease(row) })
	if err != nil {
		return nil, fmt.Errorf("listing releases of %s: %w", app, err)
	}
	return releases, nil
}

// RollbackTarget returns the release number that "roll back" means when no
// number is given: the newest release before current (the release that
// serves traffic, or the latest that went out when current is 0) that went
// out; failed releases are skipped, they never ran. The error wraps
// ErrNotFound when there is no such release.
func (s *Store) RollbackTarget(ctx context.Context, tenantID, app string, current int) (int, error) {
	if current <= 0 {
		latest, err := s.LatestRelease(ctx, tenantID, app)
		if err != nil {
			return 0, err
		}
		current = latest.Number
	}
	r, err := s.PreviousRelease(ctx, tenantID, app, current)
	if err != nil {
		return 0, err
	}
	return r.Number, nil
}

// PrunedReleases is what PruneReleases marked pruned.
type PrunedReleases struct {
	// Releases are the releases it marked, oldest first.
	Releases []Release
	// Images are the images of Releases that no kept release of the app
	// runs (a rollback re-uses an earlier release's image): those whose
	// deletion it recorded.
	Images []string
}

// PruneReleases marks the app's kept releases pruned except the newest
// keep of those that went out and release current (the one that serves, 0
// for none), and returns those it marked. Failed releases do not count
// among the keep: they never run, so each is marked at the first prune
// after it, and its directory and image (unless a kept release runs it)
// are deleted. In the same transaction it records the deletion
// of their directories and of the images in Images, which the caller does
// through PendingDeletions and FinishDeletion. Releases marked before are
// not returned again. The error wraps ErrInvalid when
// keep is less than 1.
func (s *Store) PruneReleases(ctx context.Context, tenantID, app string, keep, current int) (PrunedReleases, error) {
	if keep < 1 {
		return PrunedReleases{}, fmt.Errorf("%w release retention %d: keep at least the newest release", ErrInvalid, keep)
	}
	if !isUUID(tenantID) {
		return PrunedReleases{}, nil
	}
	var out PrunedReleases
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// The one way past the releases' immutability trigger, for this
		// transaction only (see migration 0010).
		if _, err := tx.Exec(ctx, "SELECT set_config('bex.pruning_releases', 'on', true)"); err != nil {
			return err
		}
		rows, err := tx.Query(ctx,
			"UPDATE releases SET pruned_at = now(), pruned_retention = $3 "+
				"WHERE tenant_id = $1 AND app = $2 AND pruned_at IS NULL AND number <> $4 "+
				"AND (status = 'failed' OR number NOT IN (SELECT number FROM releases "+
				"WHERE tenant_id = $1 AND app = $2 AND status = 'succeeded' ORDER BY number DESC LIMIT $3)) "+
				"RETURNING "+releaseColumns,
			tenantID, app, keep, current)
		if err != nil {
			return err
		}
		out.Releases, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (Release, error) { return scanRelease(row) })
		if err != nil || len(out.Releases) == 0 {
			return err
		}
		rows, err = tx.Query(ctx, "SELECT DISTINCT image FROM releases WHERE tenant_id = $1 AND app = $2 AND pruned_at IS NULL", tenantID, app)
		if err != nil {
			return err
		}
		kept, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		running := map[string]bool{}
		for _, image := range kept {
			running[image] = true
		}
		slices.SortFunc(out.Releases, func(a, b Release) int { return a.Number - b.Number })
		for _, r := range out.Releases {
			reason := fmt.Sprintf("release v%d pruned", r.Number)
			if _, err := tx.Exec(ctx, queueDeletionSQL, tenantID, app, DeleteReleaseDirectory, strconv.Itoa(r.Number), reason); err != nil {
				return err
			}
			if !running[r.Image] {
				running[r.Image] = true
				out.Images = append(out.Images, r.Image)
				if _, err := tx.Exec(ctx, queueDeletionSQL, tenantID, app, DeleteImage, r.Image, reason); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return PrunedReleases{}, fmt.Errorf("pruning releases of %s: %w", app, err)
	}
	return out, nil
}
