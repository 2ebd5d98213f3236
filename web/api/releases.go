package api

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"

	"bex.co/bex/internal/store"
	"bex.co/bex/web/api/apiclient"
)

func (s *Server) listReleases(c echo.Context) error {
	app, err := s.getAppObject(c)
	if err != nil {
		return err
	}
	limit, err := limitOf(c)
	if err != nil {
		return err
	}
	kinds, err := releaseFilterOf(c, "kind", "kinds", store.ParseReleaseKinds)
	if err != nil {
		return err
	}
	statuses, err := releaseFilterOf(c, "status", "statuses", store.ParseReleaseStatuses)
	if err != nil {
		return err
	}
	before, err := releaseBeforeOf(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	p := principalOf(c)
	releases, err := s.store.ListReleases(ctx, p.tenant.ID, app.Name,
		store.ReleaseFilter{Kinds: kinds, Statuses: statuses, Before: before, Limit: limit})
	if err != nil {
		return err
	}
	current := int(app.Status.CurrentRelease)
	builds := map[string]store.Build{}
	views := make([]apiclient.Release, 0, len(releases))
	for _, r := range releases {
		b, err := s.releaseBuild(ctx, r, builds)
		if err != nil {
			return err
		}
		views = append(views, releaseView(r, current, b))
	}
	return c.JSON(http.StatusOK, views)
}

// releaseBeforeOf reads the before query parameter of a release list: a
// release number (3 or v3), the last one of the page read before; none is
// 0, the newest page.
func releaseBeforeOf(c echo.Context) (int, error) {
	q := c.QueryParam("before")
	if q == "" {
		return 0, nil
	}
	n, ok := apiclient.ParseReleaseNumber(q)
	if !ok {
		return 0, invalid("before", "before %q is not a release number: give the last release of the page read, such as 51 or v51", q)
	}
	return n, nil
}

// releaseFilterOf reads the query parameter name of a release list with
// parse: values separated by commas, such as kind=deploy,rollback or
// status=failed; none lists every one. The parameter given twice is
// refused rather than half read; whats names its values in that refusal.
func releaseFilterOf[T any](c echo.Context, name, whats string, parse func(string) ([]T, error)) ([]T, error) {
	qs := c.QueryParams()[name]
	switch len(qs) {
	case 0:
		return nil, nil
	case 1:
	default:
		return nil, invalid(name, "%s given %d times: give the %s once, separated by commas, such as %s=%s",
			name, len(qs), whats, name, strings.Join(qs, ","))
	}
	values, err := parse(qs[0])
	if err != nil {
		return nil, invalidField(name, err)
	}
	return values, nil
}

// releaseView is what the API shows of release r of an app whose current
// release is current, built by b (zero when not known).
func releaseView(r store.Release, current int, b store.Build) apiclient.Release {
	v := apiclient.Release{
		Number:      r.Number,
		Kind:        string(r.Kind),
		RollbackTo:  r.RollbackTo,
		Description: r.Description,
		Image:       r.Image,
		Build:       b.Number,
		Current:     r.Number == current,
		Status:      apiclient.ReleaseSuperseded,
		Failure:     r.Failure,
		CreatedBy:   r.CreatedBy,
		CreatedAt:   r.CreatedAt.UTC(),
	}
	if r.PrunedAt != nil {
		at := r.PrunedAt.UTC()
		v.PrunedAt = &at
	}
	// A failed release is failed first: it is pruned at the next prune,
	// and never serves.
	switch {
	case r.Status == store.ReleaseFailed:
		v.Status = apiclient.ReleaseFailed
	case v.Current:
		v.Status = apiclient.ReleaseCurrent
	case r.PrunedAt != nil:
		v.Status = apiclient.ReleasePruned
	}
	return v
}

// releaseBuild reads the build whose image r runs, remembering the builds
// read in seen; the zero Build when r names none.
func (s *Server) releaseBuild(ctx context.Context, r store.Release, seen map[string]store.Build) (store.Build, error) {
	if r.BuildID == "" {
		return store.Build{}, nil
	}
	if b, ok := seen[r.BuildID]; ok {
		return b, nil
	}
	b, err := s.store.GetBuild(ctx, r.BuildID)
	if err != nil {
		return store.Build{}, fmt.Errorf("reading build of release v%d: %w", r.Number, err)
	}
	seen[r.BuildID] = b
	return b, nil
}

// getRelease answers one release in full: its build, its variables by
// name and what it changed from the release that went out before it (a
// failed release is skipped: it never ran).
func (s *Server) getRelease(c echo.Context) error {
	app, err := s.getAppObject(c)
	if err != nil {
		return err
	}
	ref := c.Param("release")
	number, ok := apiclient.ParseReleaseNumber(ref)
	if !ok {
		return notFound("release %q of app %q not found: give its number, such as 3", ref, app.Name)
	}
	ctx := c.Request().Context()
	tenantID := principalOf(c).tenant.ID
	r, err := s.store.GetRelease(ctx, tenantID, app.Name, number)
	if errors.Is(err, store.ErrNotFound) {
		return notFound("app %q has no release v%d: bex releases %s lists them", app.Name, number, app.Name)
	}
	if err != nil {
		return err
	}
	prev, err := s.store.PreviousRelease(ctx, tenantID, app.Name, number)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	b, err := s.releaseBuild(ctx, r, map[string]store.Build{})
	if err != nil {
		return err
	}
	v := apiclient.ReleaseInfo{
		Release: releaseView(r, int(app.Status.CurrentRelease), b),
		Commit:  b.Commit,
		Stack:   b.Stack,
		Env:     []apiclient.ReleaseEnvVar{},
		Changes: releaseChanges(prev, r),
	}
	for _, name := range slices.Sorted(maps.Keys(r.Config)) {
		v.Env = append(v.Env, apiclient.ReleaseEnvVar{Name: name, Secret: r.Config[name].SecretKeyRef != nil})
	}
	return c.JSON(http.StatusOK, v)
}

// releaseChanges says, by name, what r changed from prev (the zero
// Release before an app's first): variables added, changed and removed,
// and whether the image is another. Plain values are compared by value,
// secrets by the Secret key they read.
func releaseChanges(prev, r store.Release) apiclient.ReleaseChanges {
	ch := apiclient.ReleaseChanges{Previous: prev.Number, Image: prev.Image != r.Image,
		Added: []string{}, Changed: []string{}, Removed: []string{}}
	for _, name := range slices.Sorted(maps.Keys(r.Config)) {
		old, ok := prev.Config[name]
		switch {
		case !ok:
			ch.Added = append(ch.Added, name)
		case !sameConfigValue(old, r.Config[name]):
			ch.Changed = append(ch.Changed, name)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(prev.Config)) {
		if _, ok := r.Config[name]; !ok {
			ch.Removed = append(ch.Removed, name)
		}
	}
	return ch
}

// sameConfigValue reports whether a and b are the same plain value, or
// read the same Secret key.
func sameConfigValue(a, b store.ConfigValue) bool {
	switch {
	case a.Value != nil && b.Value != nil:
		return *a.Value == *b.Value
	case a.SecretKeyRef != nil && b.SecretKeyRef != nil:
		return *a.SecretKeyRef == *b.SecretKeyRef
	}
	return false
}

// rollback checks the target release and hands the rollback to the
// Releaser.
func (s *Server) rollback(c echo.Context) error {
	var req apiclient.RollbackRequest
	if err := bind(c, &req, true); err != nil {
		return err
	}
	app, err := s.getAppObject(c)
	if err != nil {
		return err
	}
	if req.Release < 0 {
		return invalid("release", "release %d: want a release number, or none for the one before the current", req.Release)
	}
	ctx := c.Request().Context()
	p := principalOf(c)
	current := int(app.Status.CurrentRelease)
	if current == 0 {
		latest, err := s.store.LatestRelease(ctx, p.tenant.ID, app.Name)
		if errors.Is(err, store.ErrNotFound) {
			return invalid("release", "app %q has no releases yet: push to its git remote first", app.Name)
		}
		if err != nil {
			return err
		}
		current = latest.Number
	}
	to := req.Release
	if to == 0 {
		if to, err = s.store.RollbackTarget(ctx, p.tenant.ID, app.Name, current); errors.Is(err, store.ErrNotFound) {
			return invalid("release", "app %q has no release before v%d to roll back to", app.Name, current)
		} else if err != nil {
			return err
		}
	}
	_, err = s.store.RunnableRelease(ctx, p.tenant.ID, app.Name, to)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return invalid("release", "app %q has no release v%d", app.Name, to)
	case errors.Is(err, store.ErrInvalid):
		return invalid("release", "%v", err)
	case err != nil:
		return err
	}
	if to == current {
		return invalid("release", "v%d is the current release of app %q already", to, app.Name)
	}
	awaitRollout(c)
	n, err := s.deployer.Rollback(ctx, p.tenant.Name, app.Name, to, p.actor())
	if n > 0 {
		s.audit(c, "app.rollback", app.Name, map[string]any{"to": to, "from": current, "release": n})
	}
	if err != nil {
		return fmt.Errorf("rolling %s back to v%d: %w", app.Name, to, err)
	}
	return c.JSON(http.StatusCreated, apiclient.Rollback{Release: n, RolledBackTo: to})
}
