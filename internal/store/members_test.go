package store_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"bex.co/bex/internal/store"
)

// TestMembers: roles are set and listed; the last admin can be neither
// demoted nor removed, even by two changes at once; a removed member's
// tokens, sessions and SSH keys stop authenticating.
func TestMembers(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newStore(t)
	acme := newTenant(t, s, "acme")
	other := newTenant(t, s, "other")
	member := func(tenantID, email string, role store.Role) store.User {
		t.Helper()
		u, err := s.CreateUser(ctx, store.NewUser{TenantID: tenantID, Email: email, Role: role})
		if err != nil {
			t.Fatalf("CreateUser(%s): %v", email, err)
		}
		return u
	}
	ann := member(acme.ID, "ann@acme.test", store.RoleAdmin)
	bob := member(acme.ID, "Bob@acme.test", store.RoleViewer)
	member(other.ID, "olga@other.test", store.RoleAdmin)

	if _, err := s.CreateUser(ctx, store.NewUser{TenantID: acme.ID, Email: "x@acme.test", Role: "tenant"}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("a user of the old role tenant: err = %v, want ErrInvalid", err)
	}
	ms, err := s.ListMembers(ctx, acme.ID)
	if err != nil || len(ms) != 2 || ms[0].ID != ann.ID || ms[1].ID != bob.ID {
		t.Fatalf("ListMembers = %+v, %v; want ann and bob", ms, err)
	}
	if got, err := s.GetMember(ctx, acme.ID, "BOB@acme.test"); err != nil || got.ID != bob.ID {
		t.Errorf("GetMember in another case = %+v, %v", got, err)
	}
	if _, err := s.GetMember(ctx, other.ID, "bob@acme.test"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("another tenant's member: err = %v, want ErrNotFound", err)
	}

	// The last admin.
	if _, err := s.SetMemberRole(ctx, acme.ID, "ann@acme.test", store.RoleDeveloper); !errors.Is(err, store.ErrLastAdmin) || !errors.Is(err, store.ErrConflict) {
		t.Errorf("demoting the last admin: err = %v, want ErrLastAdmin", err)
	}
	if _, err := s.RemoveMember(ctx, acme.ID, "ann@acme.test"); !errors.Is(err, store.ErrLastAdmin) {
		t.Errorf("removing the last admin: err = %v, want ErrLastAdmin", err)
	}
	if _, err := s.SetMemberRole(ctx, acme.ID, "bob@acme.test", "owner"); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("an unknown role: err = %v, want ErrInvalid", err)
	}
	if _, err := s.SetMemberRole(ctx, other.ID, "bob@acme.test", store.RoleAdmin); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("setting the role of another tenant's member: err = %v, want ErrNotFound", err)
	}
	if got, err := s.GetMember(ctx, acme.ID, "ann@acme.test"); err != nil || got.Role != store.RoleAdmin {
		t.Fatalf("after the refusals ann is %+v, %v", got, err)
	}
	if u, err := s.SetMemberRole(ctx, acme.ID, "bob@acme.test", store.RoleAdmin); err != nil || u.Role != store.RoleAdmin {
		t.Fatalf("making bob admin: %+v, %v", u, err)
	}
	// Two admins demote each other at once: one of them stays admin.
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, email := range []string{"ann@acme.test", "bob@acme.test"} {
		wg.Go(func() { _, errs[i] = s.SetMemberRole(ctx, acme.ID, email, store.RoleViewer) })
	}
	wg.Wait()
	if (errs[0] == nil) == (errs[1] == nil) || !errors.Is(errors.Join(errs...), store.ErrLastAdmin) {
		t.Fatalf("two admins demoting each other: %v; want one refused as the last admin", errs)
	}
	admin := "ann@acme.test"
	if errs[0] == nil {
		admin = "bob@acme.test"
	}

	// A removed member's credentials stop working.
	dev := member(acme.ID, "dev@acme.test", store.RoleDeveloper)
	secret, tok, err := s.CreateToken(ctx, acme.ID, dev.ID, "laptop")
	if err != nil {
		t.Fatal(err)
	}
	sessSecret, _, err := s.CreateSessionToken(ctx, tok, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	_, _, line := newKey(t)
	key, err := s.AddMemberSSHKey(ctx, acme.ID, dev.ID, "", line)
	if err != nil || key.UserID != dev.ID {
		t.Fatalf("AddMemberSSHKey = %+v, %v", key, err)
	}
	_, _, line2 := newKey(t)
	if _, err := s.AddMemberSSHKey(ctx, other.ID, dev.ID, "", line2); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a key for another tenant's member: err = %v, want ErrNotFound", err)
	}
	if u, err := s.RemoveMember(ctx, acme.ID, "DEV@acme.test"); err != nil || u.ID != dev.ID {
		t.Fatalf("RemoveMember = %+v, %v", u, err)
	}
	for name, sec := range map[string]string{"token": secret, "session": sessSecret} {
		if _, err := s.AuthenticateToken(ctx, sec); !errors.Is(err, store.ErrUnauthenticated) {
			t.Errorf("the removed member's %s: err = %v, want ErrUnauthenticated", name, err)
		}
	}
	if _, err := s.FindSSHKeyByFingerprint(ctx, key.Fingerprint); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the removed member's SSH key: err = %v, want ErrNotFound", err)
	}
	if _, err := s.RemoveMember(ctx, acme.ID, "dev@acme.test"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("removing them again: err = %v, want ErrNotFound", err)
	}
	if _, err := s.GetMember(ctx, acme.ID, admin); err != nil {
		t.Errorf("the remaining admin: %v", err)
	}
}

func TestRoles(t *testing.T) {
	for _, tt := range []struct {
		role, need store.Role
		want       bool
	}{
		{store.RoleAdmin, store.RoleViewer, true},
		{store.RoleAdmin, store.RoleAdmin, true},
		{store.RoleDeveloper, store.RoleAdmin, false},
		{store.RoleDeveloper, store.RoleDeveloper, true},
		{store.RoleViewer, store.RoleDeveloper, false},
		{store.RoleOperator, store.RoleViewer, false},
		{store.RoleAdmin, store.RoleOperator, false},
	} {
		if got := tt.role.Covers(tt.need); got != tt.want {
			t.Errorf("%s covers %s = %v, want %v", tt.role, tt.need, got, tt.want)
		}
	}
	for _, tt := range []struct {
		scope      store.Scope
		role, want store.Role
	}{
		{store.ScopeFull, store.RoleAdmin, store.RoleAdmin},
		{store.ScopeWrite, store.RoleAdmin, store.RoleDeveloper},
		{store.ScopeWrite, store.RoleViewer, store.RoleViewer},
		{store.ScopeRead, store.RoleDeveloper, store.RoleViewer},
		{store.ScopeRead, store.RoleOperator, store.RoleOperator},
	} {
		if got := tt.scope.Limit(tt.role); got != tt.want {
			t.Errorf("scope %s limits %s to %s, want %s", tt.scope, tt.role, got, tt.want)
		}
	}
}
