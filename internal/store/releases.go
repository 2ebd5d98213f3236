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
// the configuration it ran with. Rollbacks and configuration changes record
// new releases; the database refuses to change or remove one, except to
// mark it pruned (PruneReleases) once.
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

// ReleaseKinds are the kinds of release, in the order above.
func ReleaseKinds() []ReleaseKind {
	return []ReleaseKind{ReleaseKindDeploy, ReleaseKindRollback, ReleaseKindConfig}
}

// Known reports whether k is one of ReleaseKinds.
func (k ReleaseKind) Known() bool { return slices.Contains(ReleaseKinds(), k) }

// Runnable returns nil when the release can run again (be rolled back to),
// and a *PrunedError when its artifacts were pruned.
func (r Release) Runnable() error {
	if r.PrunedAt == nil {
		return nil
	}
	return &PrunedError{Number: r.Number, Retention: r.PrunedRetention}
}

// ParseReleaseKinds reads a comma-separated list of release kinds, such as
// "deploy,rollback", as a filter for ListReleases: blanks around a kind are
// ignored, a kind named twice counts once, and "" is no filter (nil). The
// error wraps ErrInvalid and names the kinds when one is not one of
// ReleaseKinds or is empty ("deploy,,config").
func ParseReleaseKinds(list string) ([]ReleaseKind, error) {
	if strings.TrimSpace(list) == "" {
		return nil, nil
	}
	var kinds []ReleaseKind
	for name := range strings.SplitSeq(list, ",") {
		k := ReleaseKind(strings.TrimSpace(name))
		switch {
		case k == "":
			return nil, fmt.Errorf("%w release kinds %q: an empty kind; give kinds separated by commas, from %s", ErrInvalid, list, kindList())
		case !k.Known():
			return nil, fmt.Errorf("%w release kind %q: want one of %s", ErrInvalid, k, kindList())
		case !slices.Contains(kinds, k):
			kinds = append(kinds, k)
		}
	}
	return kinds, nil
}

// kindList is ReleaseKinds for an error message: "deploy, rollback, config".
func kindList() string {
	names := make([]string, 0, len(ReleaseKinds()))
	for _, k := range ReleaseKinds() {
		names = append(names, string(k))
	}
	return strings.Join(names, ", ")
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
}

const releaseColumns = "id, tenant_id, app, number, kind, rollback_to, build_id, image, config, description, created_by, created_at, pruned_at, pruned_retention"

func scanRelease(row pgx.Row) (Release, error) {
	var r Release
	var buildID *string
	var config []byte
	var prunedRetention, rollbackTo *int
	err := row.Scan(&r.ID, &r.TenantID, &r.App, &r.Number, &r.Kind, &rollbackTo, &buildID, &r.Image, &config, &r.Description, &r.CreatedBy, &r.CreatedAt,
		&r.PrunedAt, &prunedRetention)
	if err != nil {
		return r, err
	}
	r.BuildID = orEmpty(buildID)
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

// CreateRelease records a release of an app with the app's next number.
// Concurrent calls for one app get distinct, consecutive numbers. The error
// wraps ErrInvalid when a required field is missing or a config value is not
// exactly one of a value and a secret reference, when the kind is not one
// of ReleaseKinds, or when a rollback names no release to run again or
// another kind names one; it wraps ErrNotFound when the tenant, the build
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
			if err := existsOr(ctx, tx, fmt.Errorf("release v%d of %s to roll back to: %w", nr.RollbackTo, nr.App, ErrNotFound),
				"SELECT EXISTS (SELECT 1 FROM releases WHERE tenant_id = $1 AND app = $2 AND number = $3)",
				nr.TenantID, nr.App, nr.RollbackTo); err != nil {
				return err
			}
		}
		number, err := nextAppNumber(ctx, tx, nr.TenantID, nr.App, "last_release")
		if err != nil {
			return err
		}
		r, err = scanRelease(tx.QueryRow(ctx,
			"INSERT INTO releases (tenant_id, app, number, kind, rollback_to, build_id, image, config, description, created_by) "+
				"VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING "+releaseColumns,
			nr.TenantID, nr.App, number, string(nr.Kind), rollbackTo, nullable(nr.BuildID), nr.Image, string(configJSON), nr.Description, nr.CreatedBy))
		return err
	})
	if _, ok := constraintViolated(err, codeForeignKeyViolation); ok {
		return Release{}, fmt.Errorf("tenant %s: %w", nr.TenantID, ErrNotFound)
	}
	if err != nil {
		if errors.Is(err, ErrNotFound) {
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
// "Rollback to v<to>". The
// error wraps ErrNotFound when there is no such release, and is a
// *PrunedError when it was pruned.
func (s *Store) CreateRollbackRelease(ctx context.Context, tenantID, app string, to int, createdBy string) (Release, error) {
	target, err := s.GetRelease(ctx, tenantID, app, to)
	if err != nil {
		return Release{}, err
	}
	if err := target.Runnable(); err != nil {
		return Release{}, err
	}
	return s.CreateRelease(ctx, NewRelease{
		TenantID:    tenantID,
		App:         app,
		BuildID:     target.BuildID,
		Image:       target.Image,
		Config:      target.Config,
		Kind:        ReleaseKindRollback,
		RollbackTo:  to,
		Description: "Rollback to v" + strconv.Itoa(to),
		CreatedBy:   createdBy,
	})
}

// GetRelease returns the tenant's release number of app; number 0 means the
// latest. The error wraps ErrNotFound when there is none.
func (s *Store) GetRelease(ctx context.Context, tenantID, app string, number int) (Release, error) {
	return getNumbered(ctx, s, "releases", releaseColumns, scanRelease, tenantID, app, number, "release v"+strconv.Itoa(number))
}

// LatestRelease returns the app's release with the highest number, which is
// the current one once the runtime has rolled it out (the App's
// status.currentRelease says which runs). The error wraps ErrNotFound when
// the app has no release.
func (s *Store) LatestRelease(ctx context.Context, tenantID, app string) (Release, error) {
	return s.GetRelease(ctx, tenantID, app, 0)
}

// CurrentRelease returns the release that serves the app: number current
// (the App's status.currentRelease) when it is set, otherwise the latest,
// which is the one a rollout is about to serve. The error wraps ErrNotFound
// when there is no such release.
func (s *Store) CurrentRelease(ctx context.Context, tenantID, app string, current int) (Release, error) {
	return s.GetRelease(ctx, tenantID, app, max(current, 0))
}

// ListReleases returns the tenant's releases of app, newest first, at most
// limit of them (50 when limit is zero, at most 1000). With kinds it returns
// only releases of those kinds, the limit counting only them. The error
// wraps ErrInvalid when one of kinds is not one of ReleaseKinds.
func (s *Store) ListReleases(ctx context.Context, tenantID, app string, limit int, kinds ...ReleaseKind) ([]Release, error) {
	for _, k := range kinds {
		if !k.Known() {
			return nil, fmt.Errorf("%w release kind %q: want one of %s", ErrInvalid, k, kindList())
		}
	}
	if !isUUID(tenantID) {
		return nil, nil
	}
	where, args := "tenant_id = $1 AND app = $2", []any{tenantID, app}
	if len(kinds) > 0 {
		names := make([]string, len(kinds))
		for i, k := range kinds {
			names[i] = string(k)
		}
		where, args = where+" AND kind = ANY($3)", append(args, names)
	}
	rows, err := s.pool.Query(ctx,
		"SELECT "+releaseColumns+" FROM releases WHERE "+where+" ORDER BY number DESC LIMIT "+
			strconv.Itoa(clampLimit(limit, defaultReleaseLimit)),
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
// number is given: the one before current (the release that serves
// traffic, or the latest when current is 0). The error wraps ErrNotFound
// when there is no earlier release.
func (s *Store) RollbackTarget(ctx context.Context, tenantID, app string, current int) (int, error) {
	if current <= 0 {
		latest, err := s.LatestRelease(ctx, tenantID, app)
		if err != nil {
			return 0, err
		}
		current = latest.Number
	}
	if current <= 1 {
		return 0, fmt.Errorf("app %s has no release before v%d: %w", app, current, ErrNotFound)
	}
	r, err := s.GetRelease(ctx, tenantID, app, current-1)
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
// keep of them and release current (the one that serves, 0 for none), and
// returns those it marked. In the same transaction it records the deletion
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
				"AND number <= (SELECT max(number) FROM releases WHERE tenant_id = $1 AND app = $2) - $3 "+
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
