package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

const (
	// defaultAuditLimit is how many entries ListAudit returns when the
	// filter does not say.
	defaultAuditLimit = 100
	// maxAuditLimit caps AuditFilter.Limit.
	maxAuditLimit = 1000
)

// AuditEntry is one line of the audit log: who did what to what, from where.
type AuditEntry struct {
	// ID and At are set by the database; Audit ignores them.
	ID int64     `json:"id"`
	At time.Time `json:"at"`
	// TenantID is the tenant acted on or for; empty for platform actions.
	TenantID string `json:"tenantID,omitempty"`
	// Actor is who acted: a user's email, "token:<id>", a component's name,
	// PlatformActor for what the platform did on its own. Required.
	Actor string `json:"actor"`
	// Action is what was done, as a dotted verb: "token.create",
	// "app.deploy". Required.
	Action string `json:"action"`
	// Target is what it was done to: an app, a token ID, a hostname.
	Target string `json:"target,omitempty"`
	// SourceAddr is where the request came from: an IP address with or
	// without port.
	SourceAddr string `json:"sourceAddr,omitempty"`
	// Details is a JSON object with whatever else matters. Nil means {}.
	Details json.RawMessage `json:"details,omitempty"`
}

// AuditFilter selects audit entries. Zero fields select everything.
type AuditFilter struct {
	TenantID string
	Actor    string
	Action   string
	// Since keeps entries at or after this time.
	Since time.Time
	// BeforeID keeps entries older than this ID, to page back from the
	// last ID of the previous page.
	BeforeID int64
	// Limit is the most entries returned: 100 when zero, at most 1000.
	Limit int
}

// Audit appends e to the audit log; the database sets its ID and time. The
// error wraps ErrInvalid when Actor or Action is empty, TenantID is not an
// ID, or Details is not a JSON object. Entries are never changed or removed:
// the database refuses to. When ctx ends before Audit returns, the entry may
// or may not have been stored.
func (s *Store) Audit(ctx context.Context, e AuditEntry) error {
	if e.Actor == "" || e.Action == "" {
		return fmt.Errorf("%w audit entry: actor and action are required (actor %q, action %q)", ErrInvalid, e.Actor, e.Action)
	}
	if e.TenantID != "" && !isUUID(e.TenantID) {
		return fmt.Errorf("%w audit entry: tenant ID %q", ErrInvalid, e.TenantID)
	}
	details := e.Details
	if len(details) == 0 {
		details = json.RawMessage("{}")
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(details, &obj); err != nil || obj == nil {
		return fmt.Errorf("%w audit entry: details are not a JSON object", ErrInvalid)
	}
	if _, err := s.pool.Exec(ctx,
		"INSERT INTO audit_log (tenant_id, actor, action, target, source_addr, details) VALUES ($1, $2, $3, $4, $5, $6)",
		nullable(e.TenantID), e.Actor, e.Action, e.Target, e.SourceAddr, string(details)); err != nil {
		return fmt.Errorf("writing audit entry %s by %s: %w", e.Action, e.Actor, err)
	}
	return nil
}

// ListAudit returns the entries that f selects, newest first.
func (s *Store) ListAudit(ctx context.Context, f AuditFilter) ([]AuditEntry, error) {
	var where []string
	var args []any
	add := func(cond string, arg any) {
		args = append(args, arg)
		where = append(where, strings.ReplaceAll(cond, "?", "$"+strconv.Itoa(len(args))))
	}
	if f.TenantID != "" {
		if !isUUID(f.TenantID) {
			return nil, nil
		}
		add("tenant_id = ?", f.TenantID)
	}
	if f.Actor != "" {
		add("actor = ?", f.Actor)
	}
	if f.Action != "" {
		add("action = ?", f.Action)
	}
	if !f.Since.IsZero() {
		add("at >= ?", f.Since)
	}
	if f.BeforeID > 0 {
		add("id < ?", f.BeforeID)
	}
	limit := f.Limit
	if limit <= 0 {
		limit = defaultAuditLimit
	}
	limit = min(limit, maxAuditLimit)

	query := "SELECT id, at, tenant_id, actor, action, target, source_addr, details FROM audit_log"
	if len(where) > 0 {
		query += " WHERE " + strings.Join(where, " AND ")
	}
	query += " ORDER BY id DESC LIMIT " + strconv.Itoa(limit)

	rows, err := s.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("listing audit entries: %w", err)
	}
	entries, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (AuditEntry, error) {
		var e AuditEntry
		var tenantID *string
		err := row.Scan(&e.ID, &e.At, &tenantID, &e.Actor, &e.Action, &e.Target, &e.SourceAddr, &e.Details)
		e.TenantID = orEmpty(tenantID)
		return e, err
	})
	if err != nil {
		return nil, fmt.Errorf("listing audit entries: %w", err)
	}
	return entries, nil
}
