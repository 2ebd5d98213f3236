package app_test

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"bex.co/bex/cmd/bex/app"
	"bex.co/bex/internal/controlplane/cptest"
	"bex.co/bex/internal/store"
	"bex.co/bex/web/api/apiclient"
	"bex.co/bex/web/api/apitest"
)

// TestAdminMembersCLI: against the real API and Postgres, the operator
// recovers a tenant whose only admin is gone with bex admin members: it
// lists the members, cannot demote or remove the last admin (exit 4,
// nothing changed), invites a new admin whose code works, revokes another
// invitation, gives a member another role and removes the old admin. No --tenant, an unknown tenant
// and a tenant's token exit with their codes.
func TestAdminMembersCLI(t *testing.T) {
	e := apitest.Start(t, cptest.Start(t))
	ctx := t.Context()
	tenant, machine := e.TenantToken(t, "climem")
	annToken := e.Member(t, machine, "ann@climem.test", "admin")
	e.Member(t, annToken, "bob@climem.test", "viewer")
	operator := app.IO{ConfigDir: t.TempDir(), Getenv: func(k string) string {
		return map[string]string{"BEX_API": e.URL, "BEX_TOKEN": e.OperatorToken}[k]
	}}
	asAnn := app.IO{ConfigDir: t.TempDir(), Getenv: func(k string) string {
		return map[string]string{"BEX_API": e.URL, "BEX_TOKEN": annToken}[k]
	}}
	roles := func() string {
		t.Helper()
		ms, err := e.Store.ListMembers(ctx, tenant.ID)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, m := range ms {
			out = append(out, m.Email+" "+string(m.Role))
		}
		return strings.Join(out, ", ")
	}
	const start = "ann@climem.test admin, bob@climem.test viewer"

	out, stderr, code := bexRun(t, operator, "admin", "members", "list", "--tenant", "climem")
	if code != 0 {
		t.Fatalf("admin members list: exit %d: %s", code, stderr)
	}
	for _, line := range []string{`EMAIL +ROLE +STATUS`, `ann@climem\.test +admin +member since .+`, `bob@climem\.test +viewer +member since .+`} {
		if !regexp.MustCompile(`(?m)^` + line + `$`).MatchString(out) {
			t.Errorf("admin members list printed\n%s\nwithout a line %q", out, line)
		}
	}

	for _, tc := range []struct {
		name string
		io   app.IO
		args []string
		code int
		want app.Error
	}{
		{"demoting the last admin", operator, []string{"set-role", "ann@climem.test", "developer", "--tenant", "climem"}, app.ExitConflict,
			app.Error{Kind: app.KindConflict, Status: 409, Message: "ann@climem.test is the tenant's last admin: make another member admin first"}},
		{"removing the last admin", operator, []string{"remove", "ann@climem.test", "--tenant", "climem"}, app.ExitConflict,
			app.Error{Kind: app.KindConflict, Status: 409, Message: "ann@climem.test is the tenant's last admin: make another member admin first"}},
		{"an unknown role", operator, []string{"set-role", "bob@climem.test", "owner", "--tenant", "climem"}, app.ExitUsage,
			app.Error{Kind: app.KindInvalid, Status: 422, Field: "role", Message: `role "owner": want viewer (reads), developer (pushes, deploys, changes env, scales...) or admin (also members and tokens)`}},
		{"a member already", operator, []string{"add", "bob@climem.test", "--tenant", "climem"}, app.ExitConflict,
			app.Error{Kind: app.KindConflict, Status: 409, Field: "email", Message: "bob@climem.test is a member of climem already: change their role instead"}},
		{"an unknown member", operator, []string{"remove", "zed@climem.test", "--tenant", "climem"}, app.ExitNotFound,
			app.Error{Kind: app.KindNotFound, Status: 404, Message: `no member "zed@climem.test": bex admin members list --tenant climem shows them`}},
		{"an unknown tenant", operator, []string{"list", "--tenant", "nope"}, app.ExitNotFound,
			app.Error{Kind: app.KindNotFound, Status: 404, Message: `tenant "nope" not found`}},
		{"no tenant", operator, []string{"add", "cat@climem.test"}, app.ExitUsage,
			app.Error{Kind: app.KindUsage, Field: "tenant", Message: "give the tenant with --tenant NAME: bex admin tenant list shows them"}},
		{"a tenant's admin", asAnn, []string{"set-role", "bob@climem.test", "admin", "--tenant", "climem"}, app.ExitAuth,
			app.Error{Kind: app.KindForbidden, Status: 403, Message: "not allowed: this needs an operator's token"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"admin", "members"}, tc.args...)
			stdout, stderr, code := bexRun(t, tc.io, append(args, "-o", "json")...)
			var got struct{ Error app.Error }
			if code != tc.code || stdout != "" || json.Unmarshal([]byte(stderr), &got) != nil || got.Error != tc.want {
				t.Errorf("bex %s: exit %d, stdout %q, stderr %s; want exit %d and %+v", strings.Join(args, " "), code, stdout, stderr, tc.code, tc.want)
			}
		})
	}
	if got := roles(); got != start {
		t.Fatalf("after the refusals: %s, want %s", got, start)
	}

	// A new admin by invitation, a role, and the old admin removed.
	out, stderr, code = bexRun(t, operator, "admin", "members", "add", "cat@climem.test", "--tenant", "climem", "-o", "json")
	var inv apiclient.Invitation
	if code != 0 || json.Unmarshal([]byte(out), &inv) != nil || inv.Role != "admin" || !strings.HasPrefix(inv.Code, store.InvitationCodePrefix) {
		t.Fatalf("admin members add: exit %d, %s %s", code, out, stderr)
	}
	out, stderr, code = bexRun(t, operator, "admin", "members", "list", "--tenant", "climem")
	if code != 0 || !regexp.MustCompile(`(?m)^cat@climem\.test +admin +invited by ops@bex\.test, until .+$`).MatchString(out) {
		t.Errorf("admin members list with an invitation: exit %d:\n%s%s", code, out, stderr)
	}
	anyone, err := apiclient.New(e.URL, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := anyone.AcceptInvitation(ctx, apiclient.AcceptInvitationRequest{Code: inv.Code}); err != nil {
		t.Fatalf("cat accepting: %v", err)
	}

	// An invitation the operator revokes by its email: its code no longer
	// works.
	out, stderr, code = bexRun(t, operator, "admin", "members", "add", "dan@climem.test", "--role", "viewer", "--tenant", "climem", "-o", "json")
	var dan apiclient.Invitation
	if code != 0 || json.Unmarshal([]byte(out), &dan) != nil {
		t.Fatalf("admin members add dan: exit %d, %s %s", code, out, stderr)
	}
	want := "Revoked the invitation of dan@climem.test to climem: its code no longer works.\n"
	if out, stderr, code := bexRun(t, operator, "admin", "members", "remove", "dan@climem.test", "--tenant", "climem"); code != 0 || out != want {
		t.Errorf("admin members remove dan: exit %d, %q %s; want %q", code, out, stderr, want)
	}
	if _, err := anyone.AcceptInvitation(ctx, apiclient.AcceptInvitationRequest{Code: dan.Code}); err == nil {
		t.Error("dan accepted a revoked invitation")
	}
	for _, step := range []struct {
		args []string
		want string
	}{
		{[]string{"set-role", "bob@climem.test", "developer"}, "bob@climem.test is now developer in climem.\n"},
		{[]string{"remove", "ann@climem.test"}, "Removed ann@climem.test from climem: their tokens, sessions and SSH keys no longer work.\n"},
	} {
		args := append(append([]string{"admin", "members"}, step.args...), "--tenant", "climem")
		if out, stderr, code := bexRun(t, operator, args...); code != 0 || out != step.want {
			t.Errorf("bex %s: exit %d, %q %s; want %q", strings.Join(args, " "), code, out, stderr, step.want)
		}
	}
	if got, want := roles(), "bob@climem.test developer, cat@climem.test admin"; got != want {
		t.Errorf("members after the recovery: %s, want %s", got, want)
	}
	entries, err := e.Store.ListAudit(ctx, store.AuditFilter{TenantID: tenant.ID})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, entry := range entries {
		if strings.HasPrefix(entry.Action, "tenant.member.") || strings.HasPrefix(entry.Action, "tenant.invitation.") {
			got = append(got, entry.Actor+" "+entry.Action+" "+entry.Target)
		}
	}
	if want := "ops@bex.test tenant.member.remove ann@climem.test, ops@bex.test tenant.member.role bob@climem.test, " +
		"ops@bex.test tenant.invitation.revoke dan@climem.test, ops@bex.test tenant.member.invite dan@climem.test, " +
		"ops@bex.test tenant.member.invite cat@climem.test"; strings.Join(got, ", ") != want {
		t.Errorf("the tenant's audit log, newest first: %q, want %s", got, want)
	}
}
