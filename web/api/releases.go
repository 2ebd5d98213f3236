package api

import (
	"errors"
	"fmt"
	"net/http"

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
	ctx := c.Request().Context()
	p := principalOf(c)
	releases, err := s.store.ListReleases(ctx, p.tenant.ID, app.Name, limit)
	if err != nil {
		return err
	}
	current := int(app.Status.CurrentRelease)
	buildNumbers := map[string]int{}
	views := make([]apiclient.Release, 0, len(releases))
	for _, r := range releases {
		v := apiclient.Release{
			Number:      r.Number,
			Description: r.Description,
			Image:       r.Image,
			Current:     r.Number == current,
			CreatedBy:   r.CreatedBy,
			CreatedAt:   r.CreatedAt.UTC(),
		}
		if r.PrunedAt != nil {
			at := r.PrunedAt.UTC()
			v.PrunedAt = &at
		}
		if r.BuildID != "" {
			n, ok := buildNumbers[r.BuildID]
			if !ok {
				b, err := s.store.GetBuild(ctx, r.BuildID)
				if err != nil {
					return err
				}
				n, buildNumbers[r.BuildID] = b.Number, b.Number
			}
			v.Build = n
		}
		views = append(views, v)
	}
	return c.JSON(http.StatusOK, views)
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
	target, err := s.store.GetRelease(ctx, p.tenant.ID, app.Name, to)
	if errors.Is(err, store.ErrNotFound) {
		return invalid("release", "app %q has no release v%d", app.Name, to)
	} else if err != nil {
		return err
	}
	if err := target.Runnable(); err != nil {
		return invalid("release", "%v", err)
	}
	if to == current {
		return invalid("release", "v%d is the current release of app %q already", to, app.Name)
	}
	awaitRollout(c)
	n, err := s.deployer.Rollback(ctx, p.tenant.Name, app.Name, to, p.actor())
	if err != nil {
		return fmt.Errorf("rolling %s back to v%d: %w", app.Name, to, err)
	}
	s.audit(c, "app.rollback", app.Name, map[string]any{"to": to, "from": current, "release": n})
	return c.JSON(http.StatusCreated, apiclient.Rollback{Release: n, RolledBackTo: to})
}
