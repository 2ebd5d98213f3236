package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// ErrQuotaExceeded is what a QuotaError is: test for it with errors.Is.
var ErrQuotaExceeded = errors.New("quota exceeded")

// QuotaError says which of a tenant's quotas a request would exceed, its
// value, and what the tenant has.
type QuotaError struct {
	// Quota is the quota's name as the API and the flags spell it: apps,
	// routes, concurrentBuilds, repoBytes, buildMinutes, concurrentRuns,
	// instances, cpu, memory.
	Quota string
	// Limit is the quota's value as a person reads it ("3", "1 GiB").
	Limit string
	// Detail says what the tenant has and what to do.
	Detail string
}

func (e *QuotaError) Error() string {
	return fmt.Sprintf("the tenant's %s quota (%s) is reached: %s", e.Quota, e.Limit, e.Detail)
}

// Is makes errors.Is(err, ErrQuotaExceeded) true.
func (e *QuotaError) Is(target error) bool { return target == ErrQuotaExceeded }

// Quotas are what one tenant may have and use. Zero allows none.
type Quotas struct {
	// Apps is how many apps the tenant may have.
	Apps int `json:"apps"`
	// Routes is how many custom routes it may have over all its apps.
	Routes int `json:"routes"`
	// ConcurrentBuilds is how many of its builds may run at once.
	ConcurrentBuilds int `json:"concurrentBuilds"`
	// RepoBytes is how many bytes its git repositories may take on disk.
	RepoBytes int64 `json:"repoBytes"`
	// BuildMinutes is how many minutes its builds may take in a calendar
	// month (UTC).
	BuildMinutes int `json:"buildMinutes"`
	// ConcurrentRuns is how many of its one-off runs may run at once.
	ConcurrentRuns int `json:"concurrentRuns"`
	// Instances is how many instances its apps may run together, over
	// all their processes.
	Instances int `json:"instances"`
	// MilliCPU is how much CPU its apps' instances may request together,
	// in millicores (each instance its plan's or spec.resources' CPU).
	MilliCPU int64 `json:"cpu"`
	// MemoryBytes is how much memory its apps' instances may request
	// together, in bytes.
	MemoryBytes int64 `json:"memory"`
}

// QuotaOverrides are the quotas the operator set for one tenant; a nil
// field keeps the platform's default.
type QuotaOverrides struct {
	Apps             *int   `json:"apps,omitempty"`
	Routes           *int   `json:"routes,omitempty"`
	ConcurrentBuilds *int   `json:"concurrentBuilds,omitempty"`
	RepoBytes        *int64 `json:"repoBytes,omitempty"`
	BuildMinutes     *int   `json:"buildMinutes,omitempty"`
	ConcurrentRuns   *int   `json:"concurrentRuns,omitempty"`
	Instances        *int   `json:"instances,omitempty"`
	MilliCPU         *int64 `json:"cpu,omitempty"`
	MemoryBytes      *int64 `json:"memory,omitempty"`
}

// With returns q with the overrides that o sets.
func (q Quotas) With(o QuotaOverrides) Quotas {
	set := func(dst *int, v *int) {
		if v != nil {
			*dst = *v
		}
	}
	set(&q.Apps, o.Apps)
	set(&q.Routes, o.Routes)
	set(&q.ConcurrentBuilds, o.ConcurrentBuilds)
	set(&q.BuildMinutes, o.BuildMinutes)
	set(&q.ConcurrentRuns, o.ConcurrentRuns)
	set(&q.Instances, o.Instances)
	set64 := func(dst *int64, v *int64) {
		if v != nil {
			*dst = *v
		}
	}
	set64(&q.RepoBytes, o.RepoBytes)
	set64(&q.MilliCPU, o.MilliCPU)
	set64(&q.MemoryBytes, o.MemoryBytes)
	return q
}

// TenantQuotas returns the quotas the operator set for the tenant: all nil
// when none. The error wraps ErrNotFound when the tenant does not exist.
func (s *Store) TenantQuotas(ctx context.Context, tenantID string) (QuotaOverrides, error) {
	if !isUUID(tenantID) {
		return QuotaOverrides{}, fmt.Errorf("tenant %q: %w", tenantID, ErrNotFound)
	}
	var o QuotaOverrides
	var exists bool
	cols := make([]string, 0, len(quotaColumns))
	dest := make([]any, 0, len(quotaColumns)+1)
	dest = append(dest, &exists)
	for _, c := range quotaColumns {
		cols = append(cols, "q."+c.column)
		dest = append(dest, c.field(&o))
	}
	err := s.pool.QueryRow(ctx, "SELECT t.id IS NOT NULL, "+strings.Join(cols, ", ")+
		" FROM tenants t LEFT JOIN tenant_quotas q ON q.tenant_id = t.id WHERE t.id = $1", tenantID).Scan(dest...)
	if errors.Is(err, pgx.ErrNoRows) {
		return QuotaOverrides{}, fmt.Errorf("tenant %s: %w", tenantID, ErrNotFound)
	}
	if err != nil {
		return QuotaOverrides{}, fmt.Errorf("reading the quotas of tenant %s: %w", tenantID, err)
	}
	return o, nil
}

// SetTenantQuotas replaces the quotas the operator set for the tenant with
// o; all nil removes them, so the tenant has the defaults. The error wraps
// ErrInvalid when a value is negative and ErrNotFound when the tenant does
// not exist.
func (s *Store) SetTenantQuotas(ctx context.Context, tenantID string, o QuotaOverrides) error {
	if !isUUID(tenantID) {
		return fmt.Errorf("tenant %q: %w", tenantID, ErrNotFound)
	}
	if o == (QuotaOverrides{}) {
		if _, err := s.pool.Exec(ctx, "DELETE FROM tenant_quotas WHERE tenant_id = $1", tenantID); err != nil {
			return fmt.Errorf("removing the quotas of tenant %s: %w", tenantID, err)
		}
		return nil
	}
	// Every quota given, nil ones as the default: the patch replaces them
	// all.
	p := make(QuotaPatch, len(quotaColumns))
	for _, c := range quotaColumns {
		p[c.key] = overrideValue(c.field(&o))
	}
	return s.PatchTenantQuotas(ctx, tenantID, p)
}

// overrideValue returns the override a field of quotaColumns points to
// (an **int or an **int64) as an int64: nil for none.
func overrideValue(field any) *int64 {
	switch f := field.(type) {
	case **int:
		if *f != nil {
			v := int64(**f)
			return &v
		}
	case **int64:
		return *f
	}
	return nil
}

// quotaColumns are the columns of tenant_quotas, in the table's order, by
// the name of the quota as QuotaOverrides' JSON spells it, with the field
// of QuotaOverrides each is read into (an **int or an **int64): the one
// list TenantQuotas, SetTenantQuotas and PatchTenantQuotas build their
// statements from.
var quotaColumns = []struct {
	key, column string
	field       func(o *QuotaOverrides) any
}{
	{"apps", "apps", func(o *QuotaOverrides) any { return &o.Apps }},
	{"routes", "routes", func(o *QuotaOverrides) any { return &o.Routes }},
	{"concurrentBuilds", "concurrent_builds", func(o *QuotaOverrides) any { return &o.ConcurrentBuilds }},
	{"repoBytes", "repo_bytes", func(o *QuotaOverrides) any { return &o.RepoBytes }},
	{"buildMinutes", "build_minutes", func(o *QuotaOverrides) any { return &o.BuildMinutes }},
	{"concurrentRuns", "concurrent_runs", func(o *QuotaOverrides) any { return &o.ConcurrentRuns }},
	{"instances", "instances", func(o *QuotaOverrides) any { return &o.Instances }},
	{"cpu", "cpu", func(o *QuotaOverrides) any { return &o.MilliCPU }},
	{"memory", "memory", func(o *QuotaOverrides) any { return &o.MemoryBytes }},
}

// QuotaPatch changes some of the quotas the operator set for one tenant,
// by the quota's name as QuotaOverrides' JSON spells it (apps, cpu,
// memory...): a value sets that override, nil removes it (the default
// again), and a quota not in the map keeps what it has.
type QuotaPatch map[string]*int64

// PatchTenantQuotas changes the quotas the operator set for the tenant as
// p says, in one statement: two patches of different quotas made at once
// both hold. The error wraps ErrInvalid for an unknown quota or a negative
// value (nothing is changed then) and ErrNotFound when the tenant does not
// exist.
func (s *Store) PatchTenantQuotas(ctx context.Context, tenantID string, p QuotaPatch) error {
	return s.PatchTenantQuotasIf(ctx, tenantID, p, nil)
}

// QuotaConflict is a quota whose override is not the one a patch expected.
type QuotaConflict struct {
	// Quota is the quota's name as QuotaOverrides' JSON spells it.
	Quota string
	// Expected is the override the patch expected, Current the one the
	// tenant has; nil is no override (the platform's default).
	Expected, Current *int64
}

// QuotaConflictError is a patch refused by PatchTenantQuotasIf because
// some of the overrides it expected are no longer those the tenant has;
// Conflicts names each, in the order of the table's columns. Test for it
// with errors.Is(err, ErrConflict).
type QuotaConflictError struct {
	Conflicts []QuotaConflict
}

func (e *QuotaConflictError) Error() string {
	msgs := make([]string, len(e.Conflicts))
	for i, c := range e.Conflicts {
		msgs[i] = fmt.Sprintf("quota %s is %s, not %s", c.Quota, overrideString(c.Current), overrideString(c.Expected))
	}
	return "changed meanwhile: " + strings.Join(msgs, "; ")
}

// Is makes errors.Is(err, ErrConflict) true.
func (e *QuotaConflictError) Is(target error) bool { return target == ErrConflict }

func overrideString(v *int64) string {
	if v == nil {
		return "the default"
	}
	return fmt.Sprint(*v)
}

// PatchTenantQuotasIf is PatchTenantQuotas made only if, for each quota
// expect names, the tenant's override is the one expect gives (nil: no
// override, the default): the compare-and-set of an operator's form, which
// must not undo a change it did not show. The check and the change are one
// transaction under the row lock of the tenant's quotas, which every patch
// takes, so of two patches that expect the same old value only one is
// made. When an expected override does not hold, nothing is changed and
// the error is a *QuotaConflictError naming every one that does not. An
// empty expect is PatchTenantQuotas. The error wraps ErrInvalid for an
// unknown quota in p or expect, or a negative value in p, and ErrNotFound
// when the tenant does not exist.
func (s *Store) PatchTenantQuotasIf(ctx context.Context, tenantID string, p, expect QuotaPatch) error {
	if !isUUID(tenantID) {
		return fmt.Errorf("tenant %q: %w", tenantID, ErrNotFound)
	}
	known := map[string]bool{}
	for _, c := range quotaColumns {
		known[c.key] = true
	}
	for key, v := range p {
		switch {
		case !known[key]:
			return fmt.Errorf("%w quota %s: no such quota", ErrInvalid, key)
		case v != nil && *v < 0:
			return fmt.Errorf("%w quota %s: %d is negative", ErrInvalid, key, *v)
		}
	}
	for key := range expect {
		if !known[key] {
			return fmt.Errorf("%w quota %s: no such quota", ErrInvalid, key)
		}
	}
	// A column not in p keeps its value: $2n says whether it is given,
	// $2n+1 is its new value. A tenant without a row gets one, its other
	// columns NULL (the defaults).
	cols := make([]string, 0, len(quotaColumns))
	params := make([]string, 0, len(quotaColumns))
	sets := make([]string, 0, len(quotaColumns)+1)
	args := []any{tenantID}
	for _, c := range quotaColumns {
		v, given := p[c.key]
		args = append(args, given, v)
		cols = append(cols, c.column)
		params = append(params, fmt.Sprintf("$%d", len(args)))
		sets = append(sets, fmt.Sprintf("%[1]s = CASE WHEN $%[2]d THEN EXCLUDED.%[1]s ELSE tenant_quotas.%[1]s END", c.column, len(args)-1))
	}
	sets = append(sets, "updated_at = now()")
	upsert := "INSERT INTO tenant_quotas (tenant_id, " + strings.Join(cols, ", ") + ") VALUES ($1, " + strings.Join(params, ", ") + ") " +
		"ON CONFLICT (tenant_id) DO UPDATE SET " + strings.Join(sets, ", ")
	var err error
	if len(expect) == 0 {
		_, err = s.pool.Exec(ctx, upsert, args...)
	} else {
		err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			if err := checkQuotaExpectations(ctx, tx, tenantID, expect); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, upsert, args...)
			return err
		})
	}
	if _, ok := constraintViolated(err, codeForeignKeyViolation); ok {
		return fmt.Errorf("tenant %s: %w", tenantID, ErrNotFound)
	}
	var ce *QuotaConflictError
	if errors.As(err, &ce) {
		return err
	}
	if err != nil {
		return fmt.Errorf("changing the quotas of tenant %s: %w", tenantID, err)
	}
	return nil
}

// checkQuotaExpectations locks the tenant's quota row in tx, making an
// empty one (every quota its default) when it has none, and returns a
// *QuotaConflictError when an override expect names is not the one it
// gives. The unconditional upsert of PatchTenantQuotas takes the same row
// lock, so no patch changes the row between this check and tx's end.
func checkQuotaExpectations(ctx context.Context, tx pgx.Tx, tenantID string, expect QuotaPatch) error {
	// The empty row is what the lock is taken on; it means what no row
	// means, and is rolled back with a refused patch.
	if _, err := tx.Exec(ctx, "INSERT INTO tenant_quotas (tenant_id) VALUES ($1) ON CONFLICT (tenant_id) DO NOTHING", tenantID); err != nil {
		return err
	}
	var o QuotaOverrides
	cols := make([]string, 0, len(quotaColumns))
	dest := make([]any, 0, len(quotaColumns))
	for _, c := range quotaColumns {
		cols = append(cols, c.column)
		dest = append(dest, c.field(&o))
	}
	if err := tx.QueryRow(ctx, "SELECT "+strings.Join(cols, ", ")+" FROM tenant_quotas WHERE tenant_id = $1 FOR UPDATE", tenantID).Scan(dest...); err != nil {
		return fmt.Errorf("reading the quotas of tenant %s: %w", tenantID, err)
	}
	var conflicts []QuotaConflict
	for _, c := range quotaColumns {
		want, ok := expect[c.key]
		if !ok {
			continue
		}
		have := overrideValue(c.field(&o))
		if (have == nil) != (want == nil) || have != nil && *have != *want {
			conflicts = append(conflicts, QuotaConflict{Quota: c.key, Expected: want, Current: have})
		}
	}
	if len(conflicts) > 0 {
		return &QuotaConflictError{Conflicts: conflicts}
	}
	return nil
}

// quotaLockClass is the first key of the tenants' quota locks
// (pg_advisory_xact_lock(int, int)); the second is a hash of the tenant's
// ID and what the lock guards.
const quotaLockClass int32 = 0x62657871 // "bexq"

// WithTenantLock runs fn while it holds the tenant's lock for what ("apps",
// "routes"): an advisory lock, shared by every process on this database,
// released when fn returns. Two requests that count what the
// tenant has and then add to it, under the same lock, cannot both pass a
// quota that only one fits. fn's error is returned as it is.
func (s *Store) WithTenantLock(ctx context.Context, tenantID, what string, fn func(context.Context) error) error {
	// The lock lives on the process's lock connection, not on one of the
	// pool's: callers waiting for it hold no connection that fn, or the
	// holder, would need. A colon is in no tenant or app name, so the key
	// is no app's.
	unlock, err := s.lock(ctx, "quota:"+tenantID+"/"+what)
	if err != nil {
		return fmt.Errorf("the %s lock of tenant %s: %w", what, tenantID, err)
	}
	defer unlock()
	return fn(ctx)
}

// staleBuildAfter is how long a build may stay running before the quotas
// stop counting it as running: a process killed mid-build leaves its row
// running, and it must not hold the tenant's concurrent-build quota for
// ever. Builds are limited to far less (build.DefaultTimeout and the
// rollout).
const staleBuildAfter = 2 * time.Hour

// BuildQuota is what CreateBuild checks, under the tenant's build lock,
// before it records a build.
type BuildQuota struct {
	// ConcurrentBuilds is how many of the tenant's builds may run at once.
	ConcurrentBuilds int
	// BuildMinutes is how many minutes the tenant's builds started since
	// Since may take.
	BuildMinutes int
	Since        time.Time
}

// BuildUsage is what a tenant's builds use.
type BuildUsage struct {
	// Running is how many builds run (started within the last two hours).
	Running int `json:"runningBuilds"`
	// Seconds is how long the builds started since the time asked for took,
	// running ones until now.
	Seconds int64 `json:"buildSeconds"`
}

// BuildUsage returns what the tenant's builds use: those running, and the
// time taken by those started since since.
func (s *Store) BuildUsage(ctx context.Context, tenantID string, since time.Time) (BuildUsage, error) {
	if !isUUID(tenantID) {
		return BuildUsage{}, fmt.Errorf("tenant %q: %w", tenantID, ErrNotFound)
	}
	return buildUsage(ctx, s.pool, tenantID, since)
}

func buildUsage(ctx context.Context, q querier, tenantID string, since time.Time) (BuildUsage, error) {
	var u BuildUsage
	err := q.QueryRow(ctx,
		"SELECT count(*) FILTER (WHERE status = 'running' AND started_at > now() - $3::interval), "+
			"coalesce(sum(extract(epoch FROM least(coalesce(finished_at, now()) - started_at, $3::interval)))"+
			" FILTER (WHERE started_at >= $2), 0)::bigint "+
			"FROM builds WHERE tenant_id = $1 AND (status = 'running' OR started_at >= $2)",
		tenantID, since, staleBuildAfter).Scan(&u.Running, &u.Seconds)
	if err != nil {
		return BuildUsage{}, fmt.Errorf("reading the build usage of tenant %s: %w", tenantID, err)
	}
	return u, nil
}

// checkBuildQuota refuses a build when the tenant's running builds or this
// window's build minutes are at their quota; tx holds the tenant's build
// lock.
func checkBuildQuota(ctx context.Context, tx pgx.Tx, tenantID string, q BuildQuota) error {
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1, hashtext($2))", quotaLockClass, tenantID+"/builds"); err != nil {
		return fmt.Errorf("taking the build lock of tenant %s: %w", tenantID, err)
	}
	u, err := buildUsage(ctx, tx, tenantID, q.Since)
	if err != nil {
		return err
	}
	if u.Running >= q.ConcurrentBuilds {
		return &QuotaError{Quota: "concurrentBuilds", Limit: fmt.Sprint(q.ConcurrentBuilds),
			Detail: fmt.Sprintf("%d of its builds %s running; push again when one has finished, or ask the operator to raise the quota", u.Running, plural(u.Running, "is", "are"))}
	}
	if u.Seconds >= int64(q.BuildMinutes)*60 {
		return &QuotaError{Quota: "buildMinutes", Limit: fmt.Sprintf("%d minutes a month", q.BuildMinutes),
			Detail: fmt.Sprintf("its builds took %d minutes since %s; the quota renews on the 1st of next month, or ask the operator to raise it", u.Seconds/60, q.Since.UTC().Format("2006-01-02"))}
	}
	return nil
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// MonthStart returns the start of t's calendar month in UTC: the start of
// the build-minutes window.
func MonthStart(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
}
