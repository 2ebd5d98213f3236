package app_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"bex.co/bex/cmd/bex/app"
	"bex.co/bex/internal/controlplane/cptest"
	"bex.co/bex/web/api/apiclient"
	"bex.co/bex/web/api/apitest"
)

// TestTeamsCLI: an admin invites with bex members add, the invitee joins
// with bex login --invite (the code then fails), roles are set and listed,
// the last admin stays, a pending invitation is revoked by remove; tokens
// are made with a scope and expiry, listed without their secret and
// revoked, and the revoked one is refused at the next command.
func TestTeamsCLI(t *testing.T) {
	e := apitest.Start(t, cptest.Start(t))
	_, machine := e.TenantToken(t, "cliteam")
	admin := map[string]string{"BEX_API": e.URL, "BEX_TOKEN": machine}
	dir := t.TempDir()

	// An invitation, as text and as JSON.
	out, err := bex(t, dir, admin, "", "members", "add", "ann@cliteam.test", "--role", "admin")
	if err != nil {
		t.Fatal(err)
	}
	checkRun(t, []string{"members", "add"}, out, nil, "",
		"", `^Invited ann@cliteam\.test as admin, until \d{4}-\d\d-\d\d \d\d:\d\d UTC\.\nSend them this code; it works once:\n  bexinv_[a-z2-7]{52}\nThey join with:\n  bex login --api `+e.URL+` --invite bexinv_[a-z2-7]{52}\nor at `+e.URL+`/join\?code=bexinv_[a-z2-7]{52}\n$`)
	out, err = bex(t, dir, admin, "", "members", "add", "bob@cliteam.test", "--role", "viewer", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var bobInv apiclient.Invitation
	if err := json.Unmarshal([]byte(out), &bobInv); err != nil || bobInv.Role != "viewer" || !strings.HasPrefix(bobInv.Code, "bexinv_") {
		t.Fatalf("members add -o json = %s (%v)", out, err)
	}
	if _, err := bex(t, dir, admin, "", "members", "add", "x@cliteam.test", "--role", "owner"); err == nil || !strings.Contains(err.Error(), "(field role)") {
		t.Errorf("an unknown role: err = %v", err)
	}

	// Bob joins with the code, which then fails.
	bobDir := t.TempDir()
	out, err = bex(t, bobDir, nil, "", "login", "--api", e.URL, "--invite", bobInv.Code)
	if err != nil {
		t.Fatal(err)
	}
	if want := "Joined tenant cliteam as bob@cliteam.test, viewer.\nLogged in to " + e.URL + " as bob@cliteam.test, viewer of tenant cliteam (token first token).\n"; out != want {
		t.Errorf("login --invite printed %q, want %q", out, want)
	}
	var saved app.Config
	if b, err := os.ReadFile(filepath.Join(bobDir, "bex", "config.json")); err != nil || json.Unmarshal(b, &saved) != nil || !strings.HasPrefix(saved.Token, "bex_") {
		t.Fatalf("the joined member's config: %s (%v)", b, err)
	}
	if _, err := bex(t, t.TempDir(), nil, "", "login", "--api", e.URL, "--invite", bobInv.Code); err == nil || !strings.Contains(err.Error(), "unknown, used, revoked or expired") {
		t.Errorf("the code a second time: err = %v", err)
	}
	if _, err := bex(t, bobDir, nil, "", "members", "add", "eve@cliteam.test", "--role", "admin"); err == nil || !strings.Contains(err.Error(), "not allowed: this needs the admin role: your role in tenant cliteam is viewer") {
		t.Errorf("a viewer inviting: err = %v", err)
	}

	for _, tc := range []cliCase{
		{name: "list as the viewer", env: map[string]string{}, args: []string{"members"},
			match: `^EMAIL +ROLE +STATUS\nbob@cliteam\.test \(you\)  viewer  member since \d{4}-\d\d-\d\d \d\d:\d\d\n$`},
		{name: "list as the admin", env: admin, args: []string{"members", "list"},
			match: `(?s)bob@cliteam\.test +viewer +member since .*\nann@cliteam\.test +admin +invited by token:test, until \d{4}`},
		{name: "list json", env: admin, args: []string{"members", "list", "-o", "json"}, json: func(t *testing.T, out []byte) {
			var l struct {
				Members     []apiclient.Member     `json:"members"`
				Invitations []apiclient.Invitation `json:"invitations"`
			}
			if err := json.Unmarshal(out, &l); err != nil || len(l.Members) != 1 || len(l.Invitations) != 1 || l.Invitations[0].Code != "" {
				t.Errorf("members list -o json = %s (%v)", out, err)
			}
		}},
		{name: "set role", env: admin, args: []string{"members", "set-role", "bob@cliteam.test", "admin"}, want: "bob@cliteam.test is now admin.\n"},
		{name: "last admin", env: admin, args: []string{"members", "set-role", "bob@cliteam.test", "developer"},
			wantErr: "bob@cliteam.test is the tenant's last admin: make another member admin first"},
		{name: "set role of nobody", env: admin, args: []string{"members", "set-role", "nobody@cliteam.test", "viewer"}, wantErr: `no member "nobody@cliteam.test"`},
		{name: "revoke an invitation", env: admin, args: []string{"members", "remove", "ann@cliteam.test"},
			want: "Revoked the invitation of ann@cliteam.test: its code no longer works.\n"},
		{name: "remove nobody", env: admin, args: []string{"members", "remove", "ann@cliteam.test"}, wantErr: "ann@cliteam.test is neither a member nor invited"},
	} {
		tc.run(t, bobDir, nil)
	}

	// Tokens.
	bob := map[string]string{"BEX_API": e.URL, "BEX_TOKEN": saved.Token}
	out, err = bex(t, dir, bob, "", "tokens", "create", "ci", "--scope", "write", "--expires-in", "30d", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var ci apiclient.CreatedToken
	if err := json.Unmarshal([]byte(out), &ci); err != nil || ci.Token.Scope != "write" || ci.Token.ExpiresAt == nil ||
		ci.Token.ExpiresAt.Sub(time.Now()) < 29*24*time.Hour || !strings.HasPrefix(ci.Secret, "bex_") {
		t.Fatalf("tokens create -o json = %s (%v)", out, err)
	}
	for _, tc := range []cliCase{
		{name: "create", args: []string{"tokens", "create", "laptop"},
			match: `^Created token laptop \([0-9a-f-]{36}, scope full\), good until it is revoked\.\nIts secret, shown this once:\n  bex_[a-z2-7]{52}\n$`},
		{name: "bad lifetime", args: []string{"tokens", "create", "x", "--expires-in", "soon"}, wantErr: `--expires-in "soon": give days (30d) or hours and minutes`},
		{name: "too long", args: []string{"tokens", "create", "x", "--expires-in", "400d"}, wantErr: "(field expiresAt)"},
		{name: "bad scope", args: []string{"tokens", "create", "x", "--scope", "admin"}, wantErr: "(field scope)"},
		{name: "list", args: []string{"tokens", "list"},
			match:  `(?m)^[0-9a-f-]{36}  first token \*  bex_[a-z2-7]{4}…  full +bob@cliteam\.test .* never\n[0-9a-f-]{36}  ci +bex_[a-z2-7]{4}…  write +bob@cliteam\.test +\d{4}-\d\d-\d\d \d\d:\d\d +- +\d{4}`,
			absent: ci.Secret},
		{name: "list json", args: []string{"tokens", "-o", "json"}, absent: ci.Secret[4:], json: func(t *testing.T, out []byte) {
			var ts []apiclient.Token
			if err := json.Unmarshal(out, &ts); err != nil || len(ts) != 4 || ts[2].Name != "ci" || ts[2].Prefix != ci.Secret[:8] {
				t.Errorf("tokens -o json = %s (%v)", out, err)
			}
		}},
		{name: "revoke unknown", args: []string{"tokens", "revoke", "nope"}, wantErr: `no token "nope": bex tokens list shows them`},
		{name: "revoke", args: []string{"tokens", "revoke", "ci"}, match: `^Revoked token ci \([0-9a-f-]{36}\)\.\n$`},
		{name: "the revoked token", env: map[string]string{"BEX_API": e.URL, "BEX_TOKEN": ci.Secret}, args: []string{"apps", "list"},
			wantErr: "the token was refused"},
	} {
		tc.run(t, dir, bob)
	}

	// A member removed: their token is refused at their next command.
	carol := e.Member(t, machine, "carol@cliteam.test", "developer")
	carolIO := app.IO{ConfigDir: t.TempDir(), Getenv: func(k string) string {
		return map[string]string{"BEX_API": e.URL, "BEX_TOKEN": carol}[k]
	}}
	if _, stderr, code := bexRun(t, carolIO, "apps", "list"); code != 0 {
		t.Fatalf("carol before her removal: exit %d, %s", code, stderr)
	}
	tc := cliCase{name: "remove a member", env: admin, args: []string{"members", "remove", "carol@cliteam.test"},
		want: "Removed carol@cliteam.test: their tokens, sessions and SSH keys no longer work.\n"}
	tc.run(t, dir, nil)
	if stdout, stderr, code := bexRun(t, carolIO, "apps", "list"); code != app.ExitAuth || stdout != "" || !strings.Contains(stderr, "bex: the token was refused") {
		t.Errorf("the removed member's token: exit %d, stdout %q, stderr %q; want %d, the token refused", code, stdout, stderr, app.ExitAuth)
	}
}
