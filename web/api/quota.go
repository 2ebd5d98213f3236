package api

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"sigs.k8s.io/controller-runtime/pkg/client"

	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
	"bex.co/bex/internal/store"
	"bex.co/bex/web/api/apiclient"
)

// getQuota answers the caller's tenant's quotas and usage.
func (s *Server) getQuota(c echo.Context) error {
	v, err := s.quotaView(c.Request().Context(), principalOf(c).tenant)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, v)
}

// adminTenant reads the tenant named by the :tenant parameter.
func (s *Server) adminTenant(c echo.Context) (store.Tenant, error) {
	name := c.Param("tenant")
	t, err := s.store.GetTenantByName(c.Request().Context(), name)
	if errors.Is(err, store.ErrNotFound) {
		return store.Tenant{}, notFound("tenant %q not found", name)
	}
	return t, err
}

func (s *Server) adminGetQuota(c echo.Context) error {
	t, err := s.adminTenant(c)
	if err != nil {
		return err
	}
	v, err := s.quotaView(c.Request().Context(), t)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, v)
}

// adminSetQuota replaces the quotas the operator set for a tenant: a quota
// left out is the default again. It lowers a quota below what the tenant
// has without taking anything away: only what comes next is refused.
func (s *Server) adminSetQuota(c echo.Context) error {
	var req apiclient.QuotaOverrides
	if err := bind(c, &req, false); err != nil {
		return err
	}
	for field, v := range map[string]int64{
		"apps": deref(req.Apps), "routes": deref(req.Routes), "concurrentBuilds": deref(req.ConcurrentBuilds),
		"repoBytes": derefInt64(req.RepoBytes), "buildMinutes": deref(req.BuildMinutes), "concurrentRuns": deref(req.ConcurrentRuns),
		"instances": deref(req.Instances), "cpu": derefInt64(req.MilliCPU), "memory": derefInt64(req.MemoryBytes),
	} {
		if err := checkQuota(field, v); err != nil {
			return invalid(field, "%s", err)
		}
	}
	t, err := s.adminTenant(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	if err := s.store.SetTenantQuotas(ctx, t.ID, store.QuotaOverrides(req)); err != nil {
		return err
	}
	s.audit(c, "tenant.quota", t.Name, map[string]any{"tenantID": t.ID, "overrides": req})
	v, err := s.quotaView(ctx, t)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, v)
}

// checkQuota says what is wrong with v as the value of the quota field.
func checkQuota(field string, v int64) error {
	switch {
	case v < 0:
		return fmt.Errorf("quota %s: %d is negative: give 0 or more, or leave it out for the default", field, v)
	case field != "repoBytes" && field != "cpu" && field != "memory" && v > math.MaxInt32:
		// The store keeps them as Postgres integers.
		return fmt.Errorf("quota %s: %d is more than %d, the largest it may be", field, v, math.MaxInt32)
	}
	return nil
}

// adminPatchQuota changes only the quotas the request names, in one
// statement: two operators changing different quotas of a tenant at once
// both keep theirs. Every quota is read and checked first; a bad one
// answers 422 naming it, and nothing is changed. The overrides the request
// expects (apiclient.QuotaExpectKey) are checked in the same transaction:
// one that does not hold answers 409 naming each quota changed meanwhile,
// with its value now, and nothing is changed or audited.
func (s *Server) adminPatchQuota(c echo.Context) error {
	var req apiclient.QuotaPatch
	if err := bind(c, &req, false); err != nil {
		return err
	}
	var expect store.QuotaPatch
	if raw, ok := req[apiclient.QuotaExpectKey]; ok {
		delete(req, apiclient.QuotaExpectKey)
		var err error
		if expect, err = readQuotaExpect(raw); err != nil {
			return err
		}
	}
	if len(req) == 0 {
		return invalid("", "give at least one quota to change, such as {\"apps\": 40}, or null for the default")
	}
	p, err := readQuotaPatch(req)
	if err != nil {
		return err
	}
	t, err := s.adminTenant(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	var ce *store.QuotaConflictError
	if err := s.store.PatchTenantQuotasIf(ctx, t.ID, p, expect); errors.As(err, &ce) {
		return quotaConflict(ce)
	} else if err != nil {
		return err
	}
	s.audit(c, "tenant.quota", t.Name, map[string]any{"tenantID": t.ID, "changes": p})
	v, err := s.quotaView(ctx, t)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, v)
}

// readQuotaExpect reads the expected overrides of a quota patch: an
// object keyed and valued as the patch. A bad one answers 422 on
// expect.KEY.
func readQuotaExpect(raw json.RawMessage) (store.QuotaPatch, error) {
	var req apiclient.QuotaPatch
	if err := json.Unmarshal(raw, &req); err != nil || req == nil {
		return nil, invalid(apiclient.QuotaExpectKey, "%s is not an object: give the overrides the tenant has now by quota, such as {\"memory\": 68719476736}, null or \"default\" for none", apiclient.QuotaExpectKey)
	}
	expect, err := readQuotaPatch(req)
	var he *httpError
	if errors.As(err, &he) && he.field != "" {
		he.field = apiclient.QuotaExpectKey + "." + he.field
		he.message = apiclient.QuotaExpectKey + ": " + he.message
	}
	return expect, err
}

// quotaConflict is the 409 of a quota patch whose expected overrides did
// not hold: the message names each quota, its value now and the one
// expected, and says to read them again; field is the first one.
func quotaConflict(ce *store.QuotaConflictError) error {
	he := &httpError{status: http.StatusConflict}
	msgs := make([]string, len(ce.Conflicts))
	for i, c := range ce.Conflicts {
		he.conflicts = append(he.conflicts, apiclient.QuotaConflict{Quota: c.Quota, Expected: c.Expected, Current: c.Current})
		msgs[i] = fmt.Sprintf("%s is now %s, not %s", c.Quota, apiclient.QuotaInput(c.Quota, c.Current), apiclient.QuotaInput(c.Quota, c.Expected))
	}
	he.field = ce.Conflicts[0].Quota
	he.message = "changed meanwhile, nothing was changed: " + strings.Join(msgs, "; ") + ": read the quotas again and send the patch anew"
	return he
}

// readQuotaPatch reads each quota of req, in the order bex quota shows
// them and then the unknown ones by name: a whole number, null or
// "default". The first bad one is the 422's field; the message names every
// bad one.
func readQuotaPatch(req apiclient.QuotaPatch) (store.QuotaPatch, error) {
	keys := apiclient.QuotaKeys()
	known := make(map[string]bool, len(keys))
	for _, k := range keys {
		known[k] = true
	}
	var unknown []string
	for k := range req {
		if !known[k] {
			unknown = append(unknown, k)
		}
	}
	slices.Sort(unknown)
	p := store.QuotaPatch{}
	var first string
	var msgs []string
	for _, k := range append(keys, unknown...) {
		raw, ok := req[k]
		if !ok {
			continue
		}
		v, err := readQuotaValue(k, known[k], raw)
		if err != nil {
			first = cmp.Or(first, k)
			msgs = append(msgs, err.Error())
			continue
		}
		p[k] = v
	}
	if len(msgs) > 0 {
		return nil, invalid(first, "%s", strings.Join(msgs, "; "))
	}
	return p, nil
}

// readQuotaValue reads one quota of a patch: nil for null or "default".
func readQuotaValue(key string, known bool, raw json.RawMessage) (*int64, error) {
	if !known {
		return nil, fmt.Errorf("quota %s: no such quota: give one of %s", key, strings.Join(apiclient.QuotaKeys(), ", "))
	}
	var word string
	if s := strings.TrimSpace(string(raw)); s == "null" || json.Unmarshal(raw, &word) == nil && word == "default" {
		return nil, nil
	}
	var n int64
	if err := json.Unmarshal(raw, &n); err != nil {
		return nil, fmt.Errorf("quota %s: %s is not a whole number: give one (cpu in millicores, repoBytes and memory in bytes), or null or \"default\" for the default", key, raw)
	}
	if err := checkQuota(key, n); err != nil {
		return nil, err
	}
	return &n, nil
}

func deref(p *int) int64 {
	if p == nil {
		return 0
	}
	return int64(*p)
}

func derefInt64(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

// quotaView reads a tenant's quotas, the overrides among them and what it
// uses of each.
func (s *Server) quotaView(ctx context.Context, t store.Tenant) (apiclient.Quota, error) {
	o, err := s.store.TenantQuotas(ctx, t.ID)
	if err != nil {
		return apiclient.Quota{}, err
	}
	q := s.quotas.With(o)
	since := store.MonthStart(time.Now())
	builds, err := s.store.BuildUsage(ctx, t.ID, since)
	if err != nil {
		return apiclient.Quota{}, err
	}
	runs, err := s.store.RunningRuns(ctx, t.ID)
	if err != nil {
		return apiclient.Quota{}, err
	}
	size, err := s.store.TenantInstances(ctx, t.ID)
	if err != nil {
		return apiclient.Quota{}, err
	}
	var apps platformv1alpha1.AppList
	if err := s.kube.List(ctx, &apps, client.InNamespace(t.Name)); err != nil {
		return apiclient.Quota{}, fmt.Errorf("listing apps: %w", err)
	}
	var routes platformv1alpha1.RouteList
	if err := s.kube.List(ctx, &routes, client.InNamespace(t.Name)); err != nil {
		return apiclient.Quota{}, fmt.Errorf("listing routes: %w", err)
	}
	return apiclient.Quota{
		Tenant:    t.Name,
		Quotas:    apiclient.Quotas(q),
		Overrides: apiclient.QuotaOverrides(o),
		Defaults:  apiclient.Quotas(s.quotas.Quotas),
		Usage: apiclient.QuotaUsage{
			Apps: len(apps.Items), Routes: len(routes.Items),
			RunningBuilds: builds.Running, BuildMinutes: int(builds.Seconds / 60), RunningRuns: runs,
			Instances: size.Instances, MilliCPU: size.MilliCPU, MemoryBytes: size.MemoryBytes,
		},
		BuildMinutesSince: since,
	}, nil
}
