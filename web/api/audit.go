package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"bex.co/bex/internal/store"
	"bex.co/bex/web/api/apiclient"
)

// listAudit answers the audit log, newest first, filtered by tenant (name),
// actor, action and time, paged back with before (the last ID seen).
func (s *Server) listAudit(c echo.Context) error {
	ctx := c.Request().Context()
	f := store.AuditFilter{Actor: strings.TrimSpace(c.QueryParam("actor")), Action: strings.TrimSpace(c.QueryParam("action"))}
	tenants, err := s.store.ListTenants(ctx)
	if err != nil {
		return err
	}
	names := make(map[string]string, len(tenants))
	for _, t := range tenants {
		names[t.ID] = t.Name
	}
	if name := strings.TrimSpace(c.QueryParam("tenant")); name != "" {
		t, err := s.store.GetTenantByName(ctx, name)
		if errors.Is(err, store.ErrNotFound) {
			return invalid("tenant", "no tenant is named %q", name)
		}
		if err != nil {
			return err
		}
		f.TenantID = t.ID
	}
	if v := strings.TrimSpace(c.QueryParam("since")); v != "" {
		if d, err := time.ParseDuration(v); err == nil && d > 0 {
			f.Since = time.Now().Add(-d)
		} else if t, err := time.Parse(time.RFC3339, v); err == nil {
			f.Since = t
		} else {
			return invalid("since", "since %q is neither a duration (24h) nor an RFC 3339 time (2026-11-30T08:00:00Z)", v)
		}
	}
	if v := c.QueryParam("before"); v != "" {
		id, err := strconv.ParseInt(v, 10, 64)
		if err != nil || id <= 0 {
			return invalid("before", "before %q is not an entry ID", v)
		}
		f.BeforeID = id
	}
	if f.Limit, err = limitOf(c); err != nil {
		return err
	}
	entries, err := s.store.ListAudit(ctx, f)
	if err != nil {
		return err
	}
	views := make([]apiclient.AuditEntry, 0, len(entries))
	for _, e := range entries {
		v := apiclient.AuditEntry{ID: e.ID, At: e.At.UTC(), Tenant: names[e.TenantID], Actor: e.Actor, Action: e.Action, Target: e.Target, SourceAddr: e.SourceAddr}
		if len(e.Details) > 0 && string(e.Details) != "{}" {
			v.Details = json.RawMessage(e.Details)
		}
		views = append(views, v)
	}
	return c.JSON(http.StatusOK, views)
}
