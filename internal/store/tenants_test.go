package store_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"bex.co/bex/internal/store"
)

func TestTenants(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newStore(t)

	acme := newTenant(t, s, "acme")
	newTenant(t, s, "0-bravo")
	if got, err := s.GetTenant(ctx, acme.ID); err != nil || got != acme {
		t.Errorf("GetTenant = %+v, %v; want %+v", got, err, acme)
	}
	if got, err := s.GetTenantByName(ctx, "acme"); err != nil || got != acme {
		t.Errorf("GetTenantByName = %+v, %v; want %+v", got, err, acme)
	}
	list, err := s.ListTenants(ctx)
	if err != nil || len(list) != 2 || list[0].Name != "0-bravo" || list[1] != acme {
		t.Errorf("ListTenants = %+v, %v; want 0-bravo and acme", list, err)
	}

	_, err = s.CreateTenant(ctx, "acme")
	if !errors.Is(err, store.ErrConflict) || !strings.Contains(err.Error(), `"acme"`) {
		t.Errorf("second acme: err = %v, want ErrConflict naming acme", err)
	}

	for _, bad := range []string{"", "Acme", "-acme", "acme-", "ac_me", "ac.me", strings.Repeat("a", 64)} {
		if _, err := s.CreateTenant(ctx, bad); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("CreateTenant(%q): err = %v, want ErrInvalid", bad, err)
		}
	}
	if _, err := s.CreateTenant(ctx, strings.Repeat("a", 63)); err != nil {
		t.Errorf("a 63-character name: %v", err)
	}
	// The database holds the rule too.
	if _, err := s.Pool().Exec(ctx, "INSERT INTO tenants (name) VALUES ('Not A Label')"); err == nil ||
		!strings.Contains(err.Error(), "tenants_name_dns_label") {
		t.Errorf("inserting a bad name directly: err = %v, want the check constraint", err)
	}

	for _, id := range []string{"00000000-0000-0000-0000-000000000000", "acme", ""} {
		if _, err := s.GetTenant(ctx, id); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("GetTenant(%q): err = %v, want ErrNotFound", id, err)
		}
	}
	if _, err := s.GetTenantByName(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetTenantByName(nope): err = %v, want ErrNotFound", err)
	}
}

func TestUsers(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newStore(t)
	acme := newTenant(t, s, "acme")

	dev, err := s.CreateUser(ctx, store.NewUser{TenantID: acme.ID, Email: " Dev@Acme.test ", Role: store.RoleAdmin, PasswordHash: "$argon2id$v=19$m=65536,t=3,p=4$c2FsdA$aGFzaA"})
	if err != nil {
		t.Fatal(err)
	}
	if dev.TenantID != acme.ID || dev.Email != "Dev@Acme.test" || dev.Role != store.RoleAdmin {
		t.Errorf("CreateUser = %+v", dev)
	}
	if got, err := s.GetUser(ctx, dev.ID); err != nil || got != dev {
		t.Errorf("GetUser = %+v, %v; want %+v", got, err, dev)
	}
	js, _ := json.Marshal(dev)
	if strings.Contains(string(js), "argon2id") {
		t.Errorf("User carries the password hash: %s", js)
	}
	var stored string
	if err := s.Pool().QueryRow(ctx, "SELECT password_hash FROM users WHERE id = $1", dev.ID).Scan(&stored); err != nil || !strings.HasPrefix(stored, "$argon2id$") {
		t.Errorf("stored password hash = %q, %v", stored, err)
	}

	_, err = s.CreateUser(ctx, store.NewUser{TenantID: acme.ID, Email: "dev@acme.TEST", Role: store.RoleAdmin})
	if !errors.Is(err, store.ErrConflict) {
		t.Errorf("the same email in other case: err = %v, want ErrConflict", err)
	}
	if _, err := s.CreateUser(ctx, store.NewUser{Email: "ops@bex.test", Role: store.RoleOperator}); err != nil {
		t.Errorf("an operator: %v", err)
	}

	tests := []struct {
		name string
		nu   store.NewUser
		want error
	}{
		{"operator with tenant", store.NewUser{TenantID: acme.ID, Email: "a@b.c", Role: store.RoleOperator}, store.ErrInvalid},
		{"tenant user without tenant", store.NewUser{Email: "a@b.c", Role: store.RoleAdmin}, store.ErrInvalid},
		{"unknown role", store.NewUser{TenantID: acme.ID, Email: "a@b.c", Role: "owner"}, store.ErrInvalid},
		{"bad email", store.NewUser{TenantID: acme.ID, Email: "nobody", Role: store.RoleAdmin}, store.ErrInvalid},
		{"missing tenant", store.NewUser{TenantID: "00000000-0000-0000-0000-000000000000", Email: "a@b.c", Role: store.RoleAdmin}, store.ErrNotFound},
	}
	for _, tt := range tests {
		if _, err := s.CreateUser(ctx, tt.nu); !errors.Is(err, tt.want) {
			t.Errorf("%s: err = %v, want %v", tt.name, err, tt.want)
		}
	}
}
