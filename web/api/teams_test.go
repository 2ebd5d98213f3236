package api_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"bex.co/bex/internal/controlplane"
	"bex.co/bex/internal/controlplane/cptest"
	"bex.co/bex/internal/store"
	"bex.co/bex/web/api/apiclient"
	"bex.co/bex/web/api/apitest"
)

// TestTeams runs the scenarios of members, roles and tokens on one control
// plane; each has its own database and tenant names.
func TestTeams(t *testing.T) {
	cp := cptest.Start(t)
	for _, tc := range []struct {
		name string
		fn   func(*testing.T, *controlplane.ControlPlane)
	}{
		{"RolesOfEveryRoute", testRolesOfEveryRoute},
		{"Members", testMembers},
		{"Tokens", testTokens},
		{"AdminMembers", testAdminMembers},
		{"AdminMemberChanges", testAdminMemberChanges},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, cp)
		})
	}
}

// routeOp is one operation of the OpenAPI document: who may call it, and
// whether it takes a body.
type routeOp struct {
	method, path, access string
	body                 bool
}

func (o routeOp) String() string { return o.method + " " + o.path }

// documentedRoutes reads the operations of the API's OpenAPI document,
// which is made from the route table.
func documentedRoutes(t *testing.T, e *apitest.Env) []routeOp {
	t.Helper()
	var doc struct {
		Paths map[string]map[string]struct {
			Access      string         `json:"x-bex-access"`
			RequestBody map[string]any `json:"requestBody"`
		} `json:"paths"`
	}
	call(t, e, http.MethodGet, "/openapi.json", "", nil).decode(t, &doc)
	var ops []routeOp
	for path, item := range doc.Paths {
		for method, op := range item {
			ops = append(ops, routeOp{method: strings.ToUpper(method), path: strings.TrimPrefix(path, "/api/v1"), access: op.Access, body: op.RequestBody != nil})
		}
	}
	slices.SortFunc(ops, func(a, b routeOp) int { return strings.Compare(a.String(), b.String()) })
	return ops
}

// selfService are the routes that change state which any member may call
// for themselves: sign in and out of the dashboard, accept an invitation,
// make and revoke their own tokens.
var selfService = []string{"POST /sessions", "DELETE /sessions/current", "POST /invitations/accept", "POST /tokens", "DELETE /tokens/{id}"}

// credentialReads are the reads a viewer may not make, because what they
// answer is a way in: env values (connection strings, keys, as Heroku
// keeps config vars from its view permission) and pending invitations.
var credentialReads = []string{"GET /apps/{app}/env", "GET /invitations"}

// testRolesOfEveryRoute walks every route of the OpenAPI document (so a
// new route is covered without a change here): every route that changes
// state needs more than a viewer unless it is self-service, every read is
// open to viewers unless it reads credentials; then a viewer, an admin's
// read-scoped token and a developer call each route and get 403 naming the
// role exactly where their role is below the route's, and the refusals
// change nothing.
func testRolesOfEveryRoute(t *testing.T, cp *controlplane.ControlPlane) {
	e := apitest.Start(t, cp)
	tenant, admin := e.TenantToken(t, "rolesacme")
	createApp(t, e, admin, "web")
	viewer := e.Member(t, admin, "vic@rolesacme.test", "viewer")
	developer := e.Member(t, admin, "dev@rolesacme.test", "developer")
	a := call(t, e, http.MethodPost, "/tokens", admin, apiclient.CreateTokenRequest{Name: "read", Scope: "read"})
	wantStatus(t, "making a read-scoped token", a, http.StatusCreated)
	var read apiclient.CreatedToken
	a.decode(t, &read)

	ops := documentedRoutes(t, e)
	if len(ops) < 40 {
		t.Fatalf("the document has %d operations", len(ops))
	}
	fill := strings.NewReplacer("{app}", "web", "{build}", "1", "{release}", "1", "{hostname}", "www.rolesacme.test", "{id}", "00000000-0000-0000-0000-000000000000",
		"{email}", "nobody@rolesacme.test", "{name}", "nothing", "{namespace}", "default", "{tenant}", "rolesacme", "{run}", "1")
	for _, o := range ops {
		mutating := o.method != http.MethodGet
		switch o.access {
		case "public", "operator":
		case "any token", "viewer":
			if mutating && !slices.Contains(selfService, o.String()) {
				t.Errorf("%s changes state and is open to %s: give it the developer or admin role", o, o.access)
			}
		case "developer", "admin":
			if !mutating && !slices.Contains(credentialReads, o.String()) {
				t.Errorf("%s reads and needs the %s role: a viewer reads everything but credentials", o, o.access)
			}
		default:
			t.Errorf("%s: x-bex-access %q is none of public, any token, operator, viewer, developer, admin", o, o.access)
		}
		if strings.Contains(fill.Replace(o.path), "{") {
			t.Fatalf("%s has a path parameter this test does not fill in: add it to fill", o)
		}
	}

	before := auditActions(t, e, tenant.ID)
	for _, who := range []struct {
		name, token string
		role        store.Role
		scope       bool
	}{
		{"a viewer", viewer, store.RoleViewer, false},
		{"an admin's read-scoped token", read.Secret, store.RoleViewer, true},
		{"a developer", developer, store.RoleDeveloper, false},
	} {
		for _, o := range ops {
			if o.access == "public" {
				continue
			}
			var body any
			if o.body {
				body = map[string]any{}
			}
			a := call(t, e, o.method, fill.Replace(o.path), who.token, body)
			need := store.Role(o.access)
			switch {
			case o.access == "operator":
				if a.status != http.StatusForbidden {
					t.Errorf("%s: %s: %d %s, want 403", who.name, o, a.status, a.body)
				}
			case need.Tenant() && !who.role.Covers(need):
				msg := a.err().Message
				if a.status != http.StatusForbidden || a.err().Role != o.access || !strings.Contains(msg, "needs the "+o.access+" role") {
					t.Errorf("%s: %s: %d %s, want 403 naming the %s role", who.name, o, a.status, a.body, o.access)
				}
				if who.scope && !strings.Contains(msg, "scope is read") {
					t.Errorf("%s: %s: %q does not say the scope narrows the token", who.name, o, msg)
				}
			default:
				if a.status == http.StatusUnauthorized || a.status == http.StatusForbidden {
					t.Errorf("%s: %s: %d %s, want it let through", who.name, o, a.status, a.body)
				}
			}
		}
	}

	// The refusals changed nothing: the viewer's and the read token's only
	// entries since the walk began are the sessions they were let open.
	for _, en := range auditActions(t, e, tenant.ID)[len(before):] {
		if (en.Actor == "vic@rolesacme.test" || en.Actor == "token:read") && en.Action != "session.create" {
			t.Errorf("%s did %s to %s", en.Actor, en.Action, en.Target)
		}
	}
	if a := call(t, e, http.MethodGet, "/apps/web", admin, nil); a.status != http.StatusOK {
		t.Errorf("app web after the walk: %d %s", a.status, a.body)
	}
	var ms []apiclient.Member
	call(t, e, http.MethodGet, "/members", admin, nil).decode(t, &ms)
	if len(ms) != 2 || ms[0].Role != "developer" || ms[1].Role != "viewer" {
		t.Errorf("members after the walk: %+v", ms)
	}
}

// whoAmI asks whom token acts for.
func whoAmI(t *testing.T, e *apitest.Env, token string) apiclient.WhoAmI {
	t.Helper()
	a := call(t, e, http.MethodGet, "/whoami", token, nil)
	wantStatus(t, "whoami", a, http.StatusOK)
	var w apiclient.WhoAmI
	a.decode(t, &w)
	return w
}

// invite invites email with role with token and returns the invitation.
func invite(t *testing.T, e *apitest.Env, token, email, role string) apiclient.Invitation {
	t.Helper()
	a := call(t, e, http.MethodPost, "/members", token, apiclient.InviteRequest{Email: email, Role: role})
	wantStatus(t, "inviting "+email, a, http.StatusCreated)
	var inv apiclient.Invitation
	a.decode(t, &inv)
	return inv
}

// accept accepts an invitation's code without a token.
func accept(t *testing.T, e *apitest.Env, code string) apiclient.AcceptedInvitation {
	t.Helper()
	a := call(t, e, http.MethodPost, "/invitations/accept", "", apiclient.AcceptInvitationRequest{Code: code})
	wantStatus(t, "accepting an invitation", a, http.StatusCreated)
	var acc apiclient.AcceptedInvitation
	a.decode(t, &acc)
	return acc
}

// testMembers: invitations by a single-use code, roles, the last admin,
// and a removed member's token refused on the next request.
func testMembers(t *testing.T, cp *controlplane.ControlPlane) {
	e := apitest.Start(t, cp)
	tenant, machine := e.TenantToken(t, "memacme")
	_, otherAdmin := e.TenantToken(t, "memother")

	inv := invite(t, e, machine, "Ann@memacme.test", "admin")
	if !strings.HasPrefix(inv.Code, store.InvitationCodePrefix) || inv.Email != "Ann@memacme.test" || inv.Role != "admin" ||
		inv.InvitedBy != "token:test" || time.Until(inv.ExpiresAt) < 6*24*time.Hour {
		t.Errorf("invitation = %+v", inv)
	}
	var pending []apiclient.Invitation
	call(t, e, http.MethodGet, "/invitations", machine, nil).decode(t, &pending)
	if len(pending) != 1 || pending[0].ID != inv.ID || pending[0].Code != "" {
		t.Errorf("pending invitations = %+v, want the one without its code", pending)
	}
	for _, tc := range []struct {
		req   apiclient.InviteRequest
		field string
	}{
		{apiclient.InviteRequest{Email: "x@memacme.test", Role: "owner"}, "role"},
		{apiclient.InviteRequest{Email: "nobody", Role: "viewer"}, "email"},
		{apiclient.InviteRequest{Email: strings.Repeat("x", 251) + "@a.b", Role: "viewer"}, "email"},
	} {
		if a := call(t, e, http.MethodPost, "/members", machine, tc.req); a.status != http.StatusUnprocessableEntity || a.err().Field != tc.field {
			t.Errorf("inviting %+v: %d %s, want 422 on %s", tc.req, a.status, a.body, tc.field)
		}
	}
	for _, code := range []string{"", "bexinv_nope", inv.Code[:len(inv.Code)-1] + "x"} {
		a := call(t, e, http.MethodPost, "/invitations/accept", "", apiclient.AcceptInvitationRequest{Code: code})
		if a.status != http.StatusNotFound && !(code == "" && a.status == http.StatusUnprocessableEntity) {
			t.Errorf("accepting code %q: %d %s, want 404 (422 for none)", code, a.status, a.body)
		}
	}
	ann := accept(t, e, inv.Code)
	if ann.Tenant != "memacme" || ann.Email != "Ann@memacme.test" || ann.Role != "admin" || !strings.HasPrefix(ann.Token, store.TokenSecretPrefix) || ann.TokenName != "first token" {
		t.Errorf("accepted = %+v", ann)
	}
	if w := whoAmI(t, e, ann.Token); w.Tenant != "memacme" || w.Email != "Ann@memacme.test" || w.Role != "admin" || w.Scope != "full" {
		t.Errorf("whoami of the new member = %+v", w)
	}
	if a := call(t, e, http.MethodPost, "/invitations/accept", "", apiclient.AcceptInvitationRequest{Code: inv.Code}); a.status != http.StatusNotFound {
		t.Errorf("accepting the code a second time: %d %s, want 404", a.status, a.body)
	}
	if a := call(t, e, http.MethodPost, "/members", ann.Token, apiclient.InviteRequest{Email: "ann@MEMACME.test", Role: "viewer"}); a.status != http.StatusConflict || a.err().Field != "email" {
		t.Errorf("inviting a member: %d %s, want 409 on email", a.status, a.body)
	}

	bob := accept(t, e, invite(t, e, ann.Token, "bob@memacme.test", "developer").Code)
	var ms []apiclient.Member
	call(t, e, http.MethodGet, "/members", bob.Token, nil).decode(t, &ms)
	if len(ms) != 2 || ms[0].Email != "Ann@memacme.test" || ms[0].Role != "admin" || ms[0].You || ms[1].Role != "developer" || !ms[1].You {
		t.Errorf("members as bob = %+v", ms)
	}
	if a := call(t, e, http.MethodPost, "/members", bob.Token, apiclient.InviteRequest{Email: "x@memacme.test", Role: "admin"}); a.status != http.StatusForbidden || a.err().Role != "admin" {
		t.Errorf("a developer inviting: %d %s, want 403 naming admin", a.status, a.body)
	}

	// The last admin can be neither demoted nor removed.
	setRole := func(token, email, role string) answer {
		t.Helper()
		return call(t, e, http.MethodPatch, "/members/"+email, token, apiclient.SetRoleRequest{Role: role})
	}
	if a := setRole(ann.Token, "Ann@memacme.test", "developer"); a.status != http.StatusConflict || !strings.Contains(a.err().Message, "last admin") {
		t.Errorf("demoting the last admin: %d %s, want 409", a.status, a.body)
	}
	if a := call(t, e, http.MethodDelete, "/members/ann@memacme.test", machine, nil); a.status != http.StatusConflict {
		t.Errorf("removing the last admin: %d %s, want 409", a.status, a.body)
	}
	if a := setRole(ann.Token, "bob@memacme.test", "owner"); a.status != http.StatusUnprocessableEntity || a.err().Field != "role" {
		t.Errorf("an unknown role: %d %s, want 422 on role", a.status, a.body)
	}
	if a := setRole(ann.Token, "nobody@memacme.test", "admin"); a.status != http.StatusNotFound {
		t.Errorf("the role of nobody: %d %s, want 404", a.status, a.body)
	}
	if a := setRole(otherAdmin, "bob@memacme.test", "admin"); a.status != http.StatusNotFound {
		t.Errorf("another tenant's admin setting bob's role: %d %s, want 404", a.status, a.body)
	}
	a := setRole(ann.Token, "bob@memacme.test", "admin")
	wantStatus(t, "making bob admin", a, http.StatusOK)
	var m apiclient.Member
	if a.decode(t, &m); m.Role != "admin" || m.You {
		t.Errorf("bob = %+v", m)
	}
	wantStatus(t, "bob demoting ann", setRole(bob.Token, "ann@memacme.test", "viewer"), http.StatusOK)
	if w := whoAmI(t, e, ann.Token); w.Role != "viewer" {
		t.Errorf("ann's token after her demotion acts as %q, want viewer", w.Role)
	}
	if a := setRole(ann.Token, "bob@memacme.test", "viewer"); a.status != http.StatusForbidden {
		t.Errorf("a viewer setting a role: %d %s, want 403", a.status, a.body)
	}

	// A revoked invitation's code fails; so does a removed member's token.
	carl := invite(t, e, bob.Token, "carl@memacme.test", "viewer")
	if a := call(t, e, http.MethodDelete, "/invitations/"+carl.ID, otherAdmin, nil); a.status != http.StatusNotFound {
		t.Errorf("another tenant revoking the invitation: %d %s, want 404", a.status, a.body)
	}
	wantStatus(t, "revoking carl's invitation", call(t, e, http.MethodDelete, "/invitations/"+carl.ID, bob.Token, nil), http.StatusNoContent)
	if a := call(t, e, http.MethodPost, "/invitations/accept", "", apiclient.AcceptInvitationRequest{Code: carl.Code}); a.status != http.StatusNotFound {
		t.Errorf("a revoked invitation's code: %d %s, want 404", a.status, a.body)
	}
	wantStatus(t, "removing ann", call(t, e, http.MethodDelete, "/members/ann@memacme.test", bob.Token, nil), http.StatusNoContent)
	if a := call(t, e, http.MethodGet, "/apps", ann.Token, nil); a.status != http.StatusUnauthorized {
		t.Errorf("the removed member's token: %d %s, want 401", a.status, a.body)
	}
	wantStatus(t, "removing her again", call(t, e, http.MethodDelete, "/members/ann@memacme.test", bob.Token, nil), http.StatusNotFound)

	var actions []string
	for _, en := range auditActions(t, e, tenant.ID) {
		actions = append(actions, en.Action+" "+en.Target+" by "+en.Actor)
	}
	want := []string{
		"member.invite Ann@memacme.test by token:test",
		"member.join Ann@memacme.test by Ann@memacme.test",
		"member.invite bob@memacme.test by Ann@memacme.test",
		"member.join bob@memacme.test by bob@memacme.test",
		"member.role bob@memacme.test by Ann@memacme.test",
		"member.role Ann@memacme.test by bob@memacme.test",
		"member.invite carl@memacme.test by bob@memacme.test",
		"invitation.revoke carl@memacme.test by bob@memacme.test",
		"member.remove Ann@memacme.test by bob@memacme.test",
	}
	if !slices.Equal(actions, want) {
		t.Errorf("audit:\n%s\nwant:\n%s", strings.Join(actions, "\n"), strings.Join(want, "\n"))
	}
}

// testTokens: personal tokens with a name, a scope and an expiry, listed
// without their secret, never acting above their member's role, revocable
// by their owner or an admin, and refused from the next request on once
// revoked or expired.
func testTokens(t *testing.T, cp *controlplane.ControlPlane) {
	e := apitest.Start(t, cp)
	tenant, admin := e.TenantToken(t, "tokacme")
	_, other := e.TenantToken(t, "tokother")
	dev := e.Member(t, admin, "dev@tokacme.test", "developer")
	viewer := e.Member(t, admin, "vic@tokacme.test", "viewer")

	create := func(token string, req apiclient.CreateTokenRequest) apiclient.CreatedToken {
		t.Helper()
		a := call(t, e, http.MethodPost, "/tokens", token, req)
		wantStatus(t, "making token "+req.Name, a, http.StatusCreated)
		var ct apiclient.CreatedToken
		a.decode(t, &ct)
		return ct
	}
	in30d := time.Now().Add(30 * 24 * time.Hour).UTC().Truncate(time.Second)
	ci := create(dev, apiclient.CreateTokenRequest{Name: "ci", Scope: "write", ExpiresAt: &in30d})
	if !strings.HasPrefix(ci.Secret, store.TokenSecretPrefix) || ci.Token.Prefix != ci.Secret[:8] || ci.Token.Scope != "write" ||
		ci.Token.User != "dev@tokacme.test" || ci.Token.ExpiresAt == nil || !ci.Token.ExpiresAt.Equal(in30d) || ci.Token.Current {
		t.Errorf("created = %+v", ci)
	}
	if w := whoAmI(t, e, ci.Secret); w.Role != "developer" || w.Scope != "write" || w.Email != "dev@tokacme.test" {
		t.Errorf("whoami of the write token = %+v", w)
	}
	// A viewer's full token is a viewer's: never above the member's role.
	vfull := create(viewer, apiclient.CreateTokenRequest{Name: "laptop"})
	if w := whoAmI(t, e, vfull.Secret); w.Role != "viewer" || w.Scope != "full" {
		t.Errorf("whoami of a viewer's full token = %+v", w)
	}
	if a := call(t, e, http.MethodPost, "/apps", vfull.Secret, apiclient.CreateAppRequest{Name: "x"}); a.status != http.StatusForbidden {
		t.Errorf("a viewer's full token creating an app: %d %s, want 403", a.status, a.body)
	}
	// A narrowed token makes no tokens; sessions keep the scope.
	rd := create(admin, apiclient.CreateTokenRequest{Name: "dashboards", Scope: "read"})
	if a := call(t, e, http.MethodPost, "/tokens", rd.Secret, apiclient.CreateTokenRequest{Name: "wider"}); a.status != http.StatusForbidden || !strings.Contains(a.err().Message, "scope full") {
		t.Errorf("a read token making a token: %d %s, want 403", a.status, a.body)
	}
	a := call(t, e, http.MethodPost, "/sessions", rd.Secret, nil)
	wantStatus(t, "a session of the read token", a, http.StatusCreated)
	var sess apiclient.Session
	if a.decode(t, &sess); sess.Role != "viewer" || whoAmI(t, e, sess.Token).Role != "viewer" {
		t.Errorf("the read token's session acts as %q, want viewer", sess.Role)
	}

	past, far := time.Now().Add(-time.Minute), time.Now().Add(2*366*24*time.Hour)
	for _, tc := range []struct {
		req   apiclient.CreateTokenRequest
		field string
	}{
		{apiclient.CreateTokenRequest{Name: " "}, "name"},
		{apiclient.CreateTokenRequest{Name: strings.Repeat("x", 65)}, "name"},
		{apiclient.CreateTokenRequest{Name: "x", Scope: "admin"}, "scope"},
		{apiclient.CreateTokenRequest{Name: "x", ExpiresAt: &past}, "expiresAt"},
		{apiclient.CreateTokenRequest{Name: "x", ExpiresAt: &far}, "expiresAt"},
	} {
		if a := call(t, e, http.MethodPost, "/tokens", dev, tc.req); a.status != http.StatusUnprocessableEntity || a.err().Field != tc.field {
			t.Errorf("making %+v: %d %s, want 422 on %s", tc.req, a.status, a.body, tc.field)
		}
	}

	list := func(token string) []apiclient.Token {
		t.Helper()
		a := call(t, e, http.MethodGet, "/tokens", token, nil)
		wantStatus(t, "listing tokens", a, http.StatusOK)
		for _, secret := range []string{ci.Secret, vfull.Secret, rd.Secret, dev, viewer, admin} {
			if strings.Contains(string(a.body), secret) || strings.Contains(string(a.body), secret[len(store.TokenSecretPrefix):]) {
				t.Fatalf("the token list shows a secret: %s", a.body)
			}
		}
		var ts []apiclient.Token
		a.decode(t, &ts)
		return ts
	}
	names := func(ts []apiclient.Token) []string {
		var out []string
		for _, tk := range ts {
			n := tk.Name
			if tk.Current {
				n += "*"
			}
			out = append(out, n+" "+tk.User)
		}
		return out
	}
	if got := names(list(dev)); !slices.Equal(got, []string{"first token* dev@tokacme.test", "ci dev@tokacme.test"}) {
		t.Errorf("the developer's tokens: %q", got)
	}
	if got := names(list(admin)); !slices.Equal(got, []string{"test* ", "first token dev@tokacme.test", "first token vic@tokacme.test", "ci dev@tokacme.test", "laptop vic@tokacme.test", "dashboards "}) {
		t.Errorf("every token, as the admin sees them: %q", got)
	}

	// Revocation works on the next request; only the owner or an admin.
	if a := call(t, e, http.MethodDelete, "/tokens/"+ci.Token.ID, viewer, nil); a.status != http.StatusForbidden || a.err().Role != "admin" {
		t.Errorf("a viewer revoking the developer's token: %d %s, want 403 naming admin", a.status, a.body)
	}
	if a := call(t, e, http.MethodDelete, "/tokens/"+ci.Token.ID, other, nil); a.status != http.StatusNotFound {
		t.Errorf("another tenant revoking it: %d %s, want 404", a.status, a.body)
	}
	wantStatus(t, "the token before its revocation", call(t, e, http.MethodGet, "/apps", ci.Secret, nil), http.StatusOK)
	wantStatus(t, "revoking it", call(t, e, http.MethodDelete, "/tokens/"+ci.Token.ID, dev, nil), http.StatusNoContent)
	if a := call(t, e, http.MethodGet, "/apps", ci.Secret, nil); a.status != http.StatusUnauthorized {
		t.Errorf("the next request of the revoked token: %d %s, want 401", a.status, a.body)
	}
	wantStatus(t, "revoking it again", call(t, e, http.MethodDelete, "/tokens/"+ci.Token.ID, dev, nil), http.StatusNotFound)
	wantStatus(t, "the admin revoking the viewer's token", call(t, e, http.MethodDelete, "/tokens/"+vfull.Token.ID, admin, nil), http.StatusNoContent)
	if a := call(t, e, http.MethodGet, "/apps", vfull.Secret, nil); a.status != http.StatusUnauthorized {
		t.Errorf("the viewer's revoked token: %d %s, want 401", a.status, a.body)
	}

	// Expiry works on the next request, and the list says so.
	soon := time.Now().Add(time.Hour)
	exp := create(dev, apiclient.CreateTokenRequest{Name: "short", ExpiresAt: &soon})
	wantStatus(t, "the token before it expires", call(t, e, http.MethodGet, "/apps", exp.Secret, nil), http.StatusOK)
	if _, err := e.Store.Pool().Exec(t.Context(), "UPDATE api_tokens SET expires_at = now() - interval '1 second' WHERE id = $1", exp.Token.ID); err != nil {
		t.Fatal(err)
	}
	if a := call(t, e, http.MethodGet, "/apps", exp.Secret, nil); a.status != http.StatusUnauthorized || !strings.Contains(a.err().Message, "expired") {
		t.Errorf("the expired token: %d %s, want 401", a.status, a.body)
	}
	ts := list(dev)
	if i := slices.IndexFunc(ts, func(tk apiclient.Token) bool { return tk.ID == exp.Token.ID }); i < 0 || !ts[i].Expired || ts[i].LastUsedAt == nil {
		t.Errorf("the expired token in the list: %+v", ts)
	}

	var actions []string
	for _, en := range auditActions(t, e, tenant.ID) {
		if strings.HasPrefix(en.Action, "token.") {
			actions = append(actions, en.Action+" by "+en.Actor)
		}
	}
	want := []string{"token.create by dev@tokacme.test", "token.create by vic@tokacme.test", "token.create by token:test",
		"token.revoke by dev@tokacme.test", "token.revoke by token:test", "token.create by dev@tokacme.test"}
	if !slices.Equal(actions, want) {
		t.Errorf("audit = %q, want %q", actions, want)
	}
}

// testAdminMembers: an operator lists a tenant's members by email with
// their roles and when they joined, never a token or its prefix; another
// tenant's members are not among them; an unknown tenant is a 404, and a
// tenant's admin gets 403.
func testAdminMembers(t *testing.T, cp *controlplane.ControlPlane) {
	e := apitest.Start(t, cp)
	_, machine := e.TenantToken(t, "opsacme")
	_, other := e.TenantToken(t, "opsother")
	before := time.Now().Add(-time.Minute)
	annToken := e.Member(t, machine, "ann@opsacme.test", "admin")
	e.Member(t, annToken, "Bob@opsacme.test", "viewer")
	e.Member(t, other, "cat@opsother.test", "developer")

	a := call(t, e, http.MethodGet, "/admin/tenants/opsacme/members", e.OperatorToken, nil)
	wantStatus(t, "an operator listing a tenant's members", a, http.StatusOK)
	var members []apiclient.Member
	a.decode(t, &members)
	var got []string
	for _, m := range members {
		got = append(got, m.Email+" "+m.Role)
		if m.CreatedAt.Before(before) || m.CreatedAt.After(time.Now()) || m.You {
			t.Errorf("member %+v: joined %s, want since %s", m, m.CreatedAt, before)
		}
	}
	if want := []string{"ann@opsacme.test admin", "Bob@opsacme.test viewer"}; !slices.Equal(got, want) {
		t.Errorf("members of opsacme: %q, want %q", got, want)
	}
	for _, secret := range []string{machine, annToken, annToken[:12], "bex_", "prefix", "token"} {
		if strings.Contains(string(a.body), secret) {
			t.Errorf("the members' answer holds %q: %s", secret, a.body)
		}
	}
	if a := call(t, e, http.MethodGet, "/admin/tenants/nope/members", e.OperatorToken, nil); a.status != http.StatusNotFound || a.err().Message != `tenant "nope" not found` {
		t.Errorf("members of an unknown tenant: %d %s, want 404", a.status, a.body)
	}
	if a := call(t, e, http.MethodGet, "/admin/tenants/opsacme/members", annToken, nil); a.status != http.StatusForbidden {
		t.Errorf("a tenant's admin listing members as an operator: %d %s, want 403", a.status, a.body)
	}
}

// testAdminMemberChanges: an operator recovers a tenant whose only admin
// is gone. Demoting or removing that last admin is refused with 409 and
// changes nothing; the operator invites a new admin (the code works as an
// admin's would), gives a member another role and removes the old admin,
// whose token stops working. Bad input answers 422 naming the field, an
// unknown tenant or member 404, a tenant's admin 403, and none of them
// changes anything. Each change is in the tenant's audit log as the
// operator's.
func testAdminMemberChanges(t *testing.T, cp *controlplane.ControlPlane) {
	e := apitest.Start(t, cp)
	tenant, machine := e.TenantToken(t, "opsfix")
	annToken := e.Member(t, machine, "ann@opsfix.test", "admin")
	e.Member(t, annToken, "bob@opsfix.test", "viewer")
	roles := func() string {
		t.Helper()
		var ms []apiclient.Member
		call(t, e, http.MethodGet, "/admin/tenants/opsfix/members", e.OperatorToken, nil).decode(t, &ms)
		var out []string
		for _, m := range ms {
			out = append(out, m.Email+" "+m.Role)
		}
		return strings.Join(out, ", ")
	}
	pending := func() int {
		t.Helper()
		var invs []apiclient.Invitation
		call(t, e, http.MethodGet, "/admin/tenants/opsfix/invitations", e.OperatorToken, nil).decode(t, &invs)
		return len(invs)
	}
	const start = "ann@opsfix.test admin, bob@opsfix.test viewer"
	if got := roles(); got != start {
		t.Fatalf("members: %s, want %s", got, start)
	}

	// Refusals: each answers its status on its field and changes nothing.
	for _, tc := range []struct {
		name, method, path, token string
		body                      any
		status                    int
		field, words              string
	}{
		{"demoting the last admin", http.MethodPatch, "/admin/tenants/opsfix/members/ann@opsfix.test", e.OperatorToken,
			apiclient.SetRoleRequest{Role: "developer"}, 409, "", "ann@opsfix.test is the tenant's last admin: make another member admin first"},
		{"removing the last admin", http.MethodDelete, "/admin/tenants/opsfix/members/ann@opsfix.test", e.OperatorToken,
			nil, 409, "", "ann@opsfix.test is the tenant's last admin"},
		{"an unknown role", http.MethodPatch, "/admin/tenants/opsfix/members/bob@opsfix.test", e.OperatorToken,
			apiclient.SetRoleRequest{Role: "owner"}, 422, "role", `role "owner": want viewer`},
		{"the operator role", http.MethodPost, "/admin/tenants/opsfix/members", e.OperatorToken,
			apiclient.InviteRequest{Email: "cat@opsfix.test", Role: "operator"}, 422, "role", `role "operator": want viewer`},
		{"a bad email", http.MethodPost, "/admin/tenants/opsfix/members", e.OperatorToken,
			apiclient.InviteRequest{Email: "cat", Role: "admin"}, 422, "email", `email "cat": want an address`},
		{"a member already", http.MethodPost, "/admin/tenants/opsfix/members", e.OperatorToken,
			apiclient.InviteRequest{Email: "Bob@opsfix.test", Role: "admin"}, 409, "email", "Bob@opsfix.test is a member of opsfix already"},
		{"an unknown member", http.MethodPatch, "/admin/tenants/opsfix/members/zed@opsfix.test", e.OperatorToken,
			apiclient.SetRoleRequest{Role: "admin"}, 404, "", `no member "zed@opsfix.test": bex admin members list --tenant opsfix shows them`},
		{"removing an unknown member", http.MethodDelete, "/admin/tenants/opsfix/members/zed@opsfix.test", e.OperatorToken,
			nil, 404, "", `no member "zed@opsfix.test"`},
		{"an unknown tenant", http.MethodPost, "/admin/tenants/nope/members", e.OperatorToken,
			apiclient.InviteRequest{Email: "cat@opsfix.test", Role: "admin"}, 404, "", `tenant "nope" not found`},
		{"a tenant's admin", http.MethodPatch, "/admin/tenants/opsfix/members/bob@opsfix.test", annToken,
			apiclient.SetRoleRequest{Role: "admin"}, 403, "", "operator"},
		{"a tenant's admin inviting", http.MethodPost, "/admin/tenants/opsfix/members", annToken,
			apiclient.InviteRequest{Email: "cat@opsfix.test", Role: "admin"}, 403, "", "operator"},
	} {
		a := call(t, e, tc.method, tc.path, tc.token, tc.body)
		if a.status != tc.status || a.err().Field != tc.field || !strings.Contains(a.err().Message, tc.words) {
			t.Errorf("%s: %d %s; want %d on field %q saying %q", tc.name, a.status, a.body, tc.status, tc.field, tc.words)
		}
	}
	if got, n := roles(), pending(); got != start || n != 0 {
		t.Fatalf("after the refusals: members %s, %d invitations; want %s and none", got, n, start)
	}
	if entries := auditActions(t, e, tenant.ID); slices.ContainsFunc(entries, func(a store.AuditEntry) bool { return strings.HasPrefix(a.Action, "tenant.member.") }) {
		t.Errorf("refusals were audited: %+v", entries)
	}

	// The operator invites a new admin, who joins with the code.
	a := call(t, e, http.MethodPost, "/admin/tenants/opsfix/members", e.OperatorToken, apiclient.InviteRequest{Email: "cat@opsfix.test", Role: "admin"})
	wantStatus(t, "the operator inviting cat", a, http.StatusCreated)
	var inv apiclient.Invitation
	a.decode(t, &inv)
	if inv.Email != "cat@opsfix.test" || inv.Role != "admin" || inv.InvitedBy != "ops@bex.test" || !strings.HasPrefix(inv.Code, store.InvitationCodePrefix) {
		t.Errorf("the invitation %+v", inv)
	}
	if n := pending(); n != 1 {
		t.Errorf("pending invitations: %d, want 1", n)
	}
	a = call(t, e, http.MethodPost, "/invitations/accept", "", apiclient.AcceptInvitationRequest{Code: inv.Code})
	wantStatus(t, "cat accepting", a, http.StatusCreated)
	var joined apiclient.AcceptedInvitation
	a.decode(t, &joined)
	if joined.Tenant != "opsfix" || joined.Role != "admin" {
		t.Errorf("cat joined %+v", joined)
	}

	// The operator revokes an invitation: its code no longer works. A
	// tenant's admin cannot use the operator's route, and an ID that is
	// no pending invitation of the tenant (another tenant's) is a 404.
	a = call(t, e, http.MethodPost, "/admin/tenants/opsfix/members", e.OperatorToken, apiclient.InviteRequest{Email: "dan@opsfix.test", Role: "viewer"})
	wantStatus(t, "the operator inviting dan", a, http.StatusCreated)
	var dan apiclient.Invitation
	a.decode(t, &dan)
	other, otherToken := e.TenantToken(t, "opsfixother")
	a = call(t, e, http.MethodPost, "/members", otherToken, apiclient.InviteRequest{Email: "eve@opsfixother.test", Role: "viewer"})
	wantStatus(t, "opsfixother inviting eve", a, http.StatusCreated)
	var eve apiclient.Invitation
	a.decode(t, &eve)
	for _, tc := range []struct {
		name, path, token string
		status            int
		words             string
	}{
		{"a tenant's admin revoking", "/admin/tenants/opsfix/invitations/" + dan.ID, annToken, 403, "operator"},
		{"another tenant's invitation", "/admin/tenants/opsfix/invitations/" + eve.ID, e.OperatorToken, 404,
			`no pending invitation "` + eve.ID + `": bex admin members list --tenant opsfix shows them`},
		{"an unknown tenant", "/admin/tenants/nope/invitations/" + dan.ID, e.OperatorToken, 404, `tenant "nope" not found`},
	} {
		if a := call(t, e, http.MethodDelete, tc.path, tc.token, nil); a.status != tc.status || !strings.Contains(a.err().Message, tc.words) {
			t.Errorf("%s: %d %s; want %d saying %q", tc.name, a.status, a.body, tc.status, tc.words)
		}
	}
	if n := pending(); n != 1 {
		t.Errorf("pending invitations after the refused revocations: %d, want dan's", n)
	}
	wantStatus(t, "the operator revoking dan's invitation", call(t, e, http.MethodDelete, "/admin/tenants/opsfix/invitations/"+dan.ID, e.OperatorToken, nil), http.StatusNoContent)
	if n := pending(); n != 0 {
		t.Errorf("pending invitations after the revocation: %d, want none", n)
	}
	if a := call(t, e, http.MethodPost, "/invitations/accept", "", apiclient.AcceptInvitationRequest{Code: dan.Code}); a.status == http.StatusCreated {
		t.Errorf("dan accepted a revoked invitation: %s", a.body)
	}
	if a := call(t, e, http.MethodPost, "/invitations/accept", "", apiclient.AcceptInvitationRequest{Code: eve.Code}); a.status != http.StatusCreated {
		t.Errorf("eve's invitation to %s, which the refused revocation named: %d %s", other.Name, a.status, a.body)
	}
	if !slices.ContainsFunc(auditActions(t, e, tenant.ID), func(a store.AuditEntry) bool {
		return a.Actor == "ops@bex.test" && a.Action == "tenant.invitation.revoke" && a.Target == "dan@opsfix.test"
	}) {
		t.Error("the tenant's audit log lacks the operator's revocation of dan's invitation")
	}

	// A role, then the old admin removed: their token no longer works.
	a = call(t, e, http.MethodPatch, "/admin/tenants/opsfix/members/bob@opsfix.test", e.OperatorToken, apiclient.SetRoleRequest{Role: "developer"})
	wantStatus(t, "the operator making bob a developer", a, http.StatusOK)
	var bob apiclient.Member
	if a.decode(t, &bob); bob.Email != "bob@opsfix.test" || bob.Role != "developer" || bob.You {
		t.Errorf("bob: %+v", bob)
	}
	wantStatus(t, "the operator removing ann", call(t, e, http.MethodDelete, "/admin/tenants/opsfix/members/ann@opsfix.test", e.OperatorToken, nil), http.StatusNoContent)
	if got, want := roles(), "bob@opsfix.test developer, cat@opsfix.test admin"; got != want {
		t.Errorf("members after the recovery: %s, want %s", got, want)
	}
	wantStatus(t, "ann's token after her removal", call(t, e, http.MethodGet, "/members", annToken, nil), http.StatusUnauthorized)
	wantStatus(t, "cat listing members", call(t, e, http.MethodGet, "/members", joined.Token, nil), http.StatusOK)

	// The tenant's audit log has the operator's member changes.
	var got []string
	for _, entry := range auditActions(t, e, tenant.ID) {
		if strings.HasPrefix(entry.Action, "tenant.member.") {
			got = append(got, entry.Actor+" "+entry.Action+" "+entry.Target)
		}
	}
	want := []string{"ops@bex.test tenant.member.invite cat@opsfix.test", "ops@bex.test tenant.member.invite dan@opsfix.test",
		"ops@bex.test tenant.member.role bob@opsfix.test", "ops@bex.test tenant.member.remove ann@opsfix.test"}
	if !slices.Equal(got, want) {
		t.Errorf("the tenant's audit log: %q, want %q", got, want)
	}
}
