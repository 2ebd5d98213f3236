package store_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"bex.co/bex/internal/store"
)

// TestInvitations: an invitation's code is good once, until it expires or
// is revoked or replaced; accepting it makes the member with the role and
// a first token; refusals change nothing.
func TestInvitations(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newStore(t)
	acme := newTenant(t, s, "acme")
	other := newTenant(t, s, "other")
	week := time.Now().Add(7 * 24 * time.Hour)
	invite := func(tenantID, email string, role store.Role) (string, store.Invitation) {
		t.Helper()
		code, inv, err := s.CreateInvitation(ctx, store.NewInvitation{TenantID: tenantID, Email: email, Role: role, InvitedBy: "ann@acme.test", ExpiresAt: week})
		if err != nil {
			t.Fatalf("inviting %s: %v", email, err)
		}
		return code, inv
	}

	code, inv := invite(acme.ID, " dev@acme.test ", store.RoleDeveloper)
	if !strings.HasPrefix(code, store.InvitationCodePrefix) || !strings.HasPrefix(code, inv.Prefix) || inv.Email != "dev@acme.test" || inv.Role != store.RoleDeveloper {
		t.Fatalf("invitation %+v, code %q", inv, code)
	}
	var stored int
	if err := s.Pool().QueryRow(ctx, "SELECT count(*) FROM invitations WHERE hash = convert_to($1, 'UTF8')", code).Scan(&stored); err != nil || stored != 0 {
		t.Errorf("the code is stored in clear (%d rows, %v)", stored, err)
	}
	for _, tt := range []struct {
		name string
		ni   store.NewInvitation
		want error
	}{
		{"bad email", store.NewInvitation{TenantID: acme.ID, Email: "nobody", Role: store.RoleViewer, InvitedBy: "a", ExpiresAt: week}, store.ErrInvalid},
		{"operator role", store.NewInvitation{TenantID: acme.ID, Email: "x@acme.test", Role: store.RoleOperator, InvitedBy: "a", ExpiresAt: week}, store.ErrInvalid},
		{"expired", store.NewInvitation{TenantID: acme.ID, Email: "x@acme.test", Role: store.RoleViewer, InvitedBy: "a", ExpiresAt: time.Now().Add(-time.Second)}, store.ErrInvalid},
		{"missing tenant", store.NewInvitation{TenantID: "00000000-0000-0000-0000-000000000000", Email: "x@acme.test", Role: store.RoleViewer, InvitedBy: "a", ExpiresAt: week}, store.ErrNotFound},
	} {
		if _, _, err := s.CreateInvitation(ctx, tt.ni); !errors.Is(err, tt.want) {
			t.Errorf("%s: err = %v, want %v", tt.name, err, tt.want)
		}
	}
	if invs, err := s.ListInvitations(ctx, acme.ID); err != nil || len(invs) != 1 || invs[0].ID != inv.ID {
		t.Fatalf("ListInvitations = %+v, %v; want the one", invs, err)
	}
	if _, err := s.RevokeInvitation(ctx, other.ID, inv.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("another tenant revoking it: err = %v, want ErrNotFound", err)
	}

	// Inviting the same email again replaces the pending invitation.
	code2, inv2 := invite(acme.ID, "DEV@acme.test", store.RoleViewer)
	if _, err := s.AcceptInvitation(ctx, code, "cli"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the replaced code: err = %v, want ErrNotFound", err)
	}
	if _, err := s.AcceptInvitation(ctx, code2, strings.Repeat("x", 65)); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("a bad token name: err = %v, want ErrInvalid", err)
	}
	a, err := s.AcceptInvitation(ctx, " "+code2+"\n", "cli")
	if err != nil {
		t.Fatalf("accepting (after a refused try): %v", err)
	}
	if a.User.Email != "DEV@acme.test" || a.User.Role != store.RoleViewer || a.User.TenantID != acme.ID || a.Invitation.ID != inv2.ID || a.Token.UserID != a.User.ID {
		t.Errorf("accepted = %+v", a)
	}
	if tok, err := s.AuthenticateToken(ctx, a.Secret); err != nil || tok.ID != a.Token.ID || tok.Scope != store.ScopeFull {
		t.Errorf("the member's first token: %+v, %v", tok, err)
	}
	if _, err := s.AcceptInvitation(ctx, code2, "cli"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a used code: err = %v, want ErrNotFound", err)
	}
	if _, _, err := s.CreateInvitation(ctx, store.NewInvitation{TenantID: acme.ID, Email: "dev@ACME.test", Role: store.RoleAdmin, InvitedBy: "a", ExpiresAt: week}); !errors.Is(err, store.ErrConflict) {
		t.Errorf("inviting a member: err = %v, want ErrConflict", err)
	}
	if invs, err := s.ListInvitations(ctx, acme.ID); err != nil || len(invs) != 0 {
		t.Errorf("pending after accepting = %+v, %v", invs, err)
	}

	// Revoked, expired, unknown and taken.
	code3, inv3 := invite(acme.ID, "ops@acme.test", store.RoleAdmin)
	if _, err := s.RevokeInvitation(ctx, acme.ID, inv3.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AcceptInvitation(ctx, code3, "cli"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a revoked code: err = %v, want ErrNotFound", err)
	}
	code4, inv4 := invite(acme.ID, "late@acme.test", store.RoleAdmin)
	if _, err := s.Pool().Exec(ctx, "UPDATE invitations SET expires_at = now() - interval '1 second' WHERE id = $1", inv4.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AcceptInvitation(ctx, code4, "cli"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("an expired code: err = %v, want ErrNotFound", err)
	}
	for _, bad := range []string{"", "bexinv_short", store.TokenSecretPrefix + strings.Repeat("a", 52), store.InvitationCodePrefix + strings.Repeat("a", 52)} {
		if _, err := s.AcceptInvitation(ctx, bad, "cli"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("code %q: err = %v, want ErrNotFound", bad, err)
		}
	}
	code5, _ := invite(other.ID, "dev@acme.test", store.RoleViewer)
	if _, err := s.AcceptInvitation(ctx, code5, "cli"); !errors.Is(err, store.ErrConflict) {
		t.Errorf("an email that is a user elsewhere: err = %v, want ErrConflict", err)
	}
	if invs, err := s.ListInvitations(ctx, other.ID); err != nil || len(invs) != 1 {
		t.Errorf("a refused acceptance used the invitation: pending %+v, %v", invs, err)
	}
	if ms, err := s.ListMembers(ctx, other.ID); err != nil || len(ms) != 0 {
		t.Errorf("a refused acceptance made members %+v, %v", ms, err)
	}

	// The limit of members and pending invitations.
	for i := range store.MaxMembers - 1 {
		if _, _, err := s.CreateInvitation(ctx, store.NewInvitation{TenantID: other.ID, Email: fmt.Sprintf("m%d@other.test", i), Role: store.RoleViewer, InvitedBy: "a", ExpiresAt: week}); err != nil {
			t.Fatalf("invitation %d: %v", i, err)
		}
	}
	var qe *store.QuotaError
	if _, _, err := s.CreateInvitation(ctx, store.NewInvitation{TenantID: other.ID, Email: "one.more@other.test", Role: store.RoleViewer, InvitedBy: "a", ExpiresAt: week}); !errors.As(err, &qe) || qe.Quota != "members" {
		t.Errorf("past %d members and invitations: err = %v, want the members quota", store.MaxMembers, err)
	}
}
