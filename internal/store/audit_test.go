package store_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"bex.co/bex/internal/store"
)

func TestAuditLog(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newStore(t)
	acme := newTenant(t, s, "acme")

	before := time.Now().Add(-time.Minute)
	entries := []store.AuditEntry{
		{TenantID: acme.ID, Actor: "dev@acme.test", Action: "token.create", Target: "laptop", SourceAddr: "192.0.2.1:5555", Details: json.RawMessage(`{"prefix": "bex_abcd"}`)},
		{TenantID: acme.ID, Actor: "dev@acme.test", Action: "app.deploy", Target: "web"},
		{Actor: "ops@bex.test", Action: "fleet.upgrade.start", Target: "eu-1", ID: 999, At: time.Unix(0, 0)},
	}
	for _, e := range entries {
		if err := s.Audit(ctx, e); err != nil {
			t.Fatalf("Audit(%+v): %v", e, err)
		}
	}

	all, err := s.ListAudit(ctx, store.AuditFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 3 || all[0].Action != "fleet.upgrade.start" || all[2].Action != "token.create" {
		t.Fatalf("ListAudit = %+v, want the three entries newest first", all)
	}
	if all[0].ID == 999 || all[0].At.Before(before) {
		t.Errorf("the caller set ID or time: %+v", all[0])
	}
	var details map[string]string
	if err := json.Unmarshal(all[2].Details, &details); err != nil || details["prefix"] != "bex_abcd" || all[2].SourceAddr != "192.0.2.1:5555" {
		t.Errorf("entry read back = %+v (details %v)", all[2], err)
	}
	if string(all[1].Details) != "{}" {
		t.Errorf("nil details read back as %s, want {}", all[1].Details)
	}

	filters := []struct {
		f    store.AuditFilter
		want []string
	}{
		{store.AuditFilter{TenantID: acme.ID}, []string{"app.deploy", "token.create"}},
		{store.AuditFilter{Actor: "ops@bex.test"}, []string{"fleet.upgrade.start"}},
		{store.AuditFilter{Action: "app.deploy"}, []string{"app.deploy"}},
		{store.AuditFilter{Limit: 1}, []string{"fleet.upgrade.start"}},
		{store.AuditFilter{BeforeID: all[0].ID, Limit: 1}, []string{"app.deploy"}},
		{store.AuditFilter{Since: time.Now().Add(time.Hour)}, nil},
		{store.AuditFilter{Since: before, TenantID: acme.ID, Action: "token.create"}, []string{"token.create"}},
	}
	for _, tt := range filters {
		got, err := s.ListAudit(ctx, tt.f)
		if err != nil {
			t.Fatal(err)
		}
		var actions []string
		for _, e := range got {
			actions = append(actions, e.Action)
		}
		if strings.Join(actions, ",") != strings.Join(tt.want, ",") {
			t.Errorf("ListAudit(%+v) = %v, want %v", tt.f, actions, tt.want)
		}
	}

	for _, bad := range []store.AuditEntry{
		{Action: "x"},
		{Actor: "x"},
		{Actor: "x", Action: "y", Details: json.RawMessage(`[1]`)},
		{Actor: "x", Action: "y", Details: json.RawMessage(`{`)},
		{Actor: "x", Action: "y", TenantID: "acme"},
	} {
		if err := s.Audit(ctx, bad); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("Audit(%+v): err = %v, want ErrInvalid", bad, err)
		}
	}
}

func TestAuditLogIsAppendOnly(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newStore(t)
	if err := s.Audit(ctx, store.AuditEntry{Actor: "dev@acme.test", Action: "app.deploy", Target: "web"}); err != nil {
		t.Fatal(err)
	}

	for _, stmt := range []string{
		"UPDATE audit_log SET actor = 'someone else'",
		"DELETE FROM audit_log",
		"DELETE FROM audit_log WHERE false",
		"TRUNCATE audit_log",
	} {
		_, err := s.Pool().Exec(ctx, stmt)
		if err == nil || !strings.Contains(err.Error(), "audit_log is append-only") {
			t.Errorf("%s: err = %v, want the database to refuse it as append-only", stmt, err)
		}
	}

	got, err := s.ListAudit(ctx, store.AuditFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Actor != "dev@acme.test" {
		t.Errorf("after the refused statements the log is %+v, want the one entry unchanged", got)
	}
}
