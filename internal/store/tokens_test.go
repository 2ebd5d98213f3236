package store_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/base32"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"bex.co/bex/internal/store"
)

func TestTokenAuthentication(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newStore(t)
	acme := newTenant(t, s, "acme")
	user, err := s.CreateUser(ctx, store.NewUser{TenantID: acme.ID, Email: "dev@acme.test", Role: store.RoleAdmin})
	if err != nil {
		t.Fatal(err)
	}

	secret, created, err := s.CreateToken(ctx, acme.ID, user.ID, "laptop")
	if err != nil {
		t.Fatalf("CreateToken: %v", err)
	}
	if !strings.HasPrefix(secret, "bex_") || len(secret) != 56 {
		t.Errorf("secret %q: want bex_ and 52 characters", secret)
	}
	if created.Prefix != secret[:8] || created.TenantID != acme.ID || created.UserID != user.ID || created.Name != "laptop" {
		t.Errorf("created token = %+v", created)
	}
	if created.LastUsedAt != nil || created.Revoked() {
		t.Errorf("a new token is used or revoked: %+v", created)
	}

	got, err := s.AuthenticateToken(ctx, secret)
	if err != nil {
		t.Fatalf("AuthenticateToken with the right secret: %v", err)
	}
	if got.ID != created.ID || got.TenantID != acme.ID || got.UserID != user.ID {
		t.Errorf("authenticated token = %+v, want %+v", got, created)
	}
	if got.LastUsedAt == nil {
		t.Error("AuthenticateToken did not record the use")
	}

	// Wrong secrets: one character off, well-formed but unknown, malformed.
	flipped := []byte(secret)
	flipped[len(flipped)-1] ^= 1
	for _, wrong := range []string{string(flipped), "bex_" + strings.Repeat("a", 52), "bex_short", "", strings.ToUpper(secret)} {
		if _, err := s.AuthenticateToken(ctx, wrong); !errors.Is(err, store.ErrUnauthenticated) {
			t.Errorf("AuthenticateToken(%q): err = %v, want ErrUnauthenticated", wrong, err)
		}
	}

	// Another tenant cannot revoke it.
	other := newTenant(t, s, "other")
	if err := s.RevokeToken(ctx, other.ID, created.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("RevokeToken from another tenant: err = %v, want ErrNotFound", err)
	}
	if _, err := s.AuthenticateToken(ctx, secret); err != nil {
		t.Fatalf("the token stopped working after another tenant's revoke: %v", err)
	}

	if err := s.RevokeToken(ctx, acme.ID, created.ID); err != nil {
		t.Fatalf("RevokeToken: %v", err)
	}
	if _, err := s.AuthenticateToken(ctx, secret); !errors.Is(err, store.ErrUnauthenticated) {
		t.Errorf("AuthenticateToken after revocation: err = %v, want ErrUnauthenticated", err)
	}
	if err := s.RevokeToken(ctx, acme.ID, created.ID); err != nil {
		t.Errorf("revoking twice: %v", err)
	}
	listed, err := s.ListTokens(ctx, acme.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(listed) != 1 || listed[0].ID != created.ID || !listed[0].Revoked() || listed[0].LastUsedAt == nil {
		t.Errorf("ListTokens = %+v, want the one token, used and revoked", listed)
	}
	if otherTokens, err := s.ListTokens(ctx, other.ID); err != nil || len(otherTokens) != 0 {
		t.Errorf("ListTokens(other) = %v, %v; want none", otherTokens, err)
	}
}

func TestTokenHashStaysInside(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newStore(t)
	acme := newTenant(t, s, "acme")

	secret, created, err := s.CreateToken(ctx, acme.ID, "", "ci")
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(secret))

	// The database holds the SHA-256 of the secret and not the secret.
	var stored []byte
	var row string
	if err := s.Pool().QueryRow(ctx, "SELECT hash, row_to_json(t)::text FROM api_tokens t WHERE id = $1", created.ID).Scan(&stored, &row); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(stored, sum[:]) {
		t.Errorf("stored hash %x, want SHA-256 of the secret %x", stored, sum)
	}
	if strings.Contains(row, secret) || strings.Contains(row, secret[8:]) {
		t.Errorf("the row holds the secret: %s", row)
	}

	// No exported type can carry a hash.
	for _, typ := range []reflect.Type{reflect.TypeFor[store.Token](), reflect.TypeFor[store.Tenant](), reflect.TypeFor[store.User]()} {
		for i := range typ.NumField() {
			f := typ.Field(i)
			if k := f.Type.Kind(); k == reflect.Slice || k == reflect.Array || strings.Contains(strings.ToLower(f.Name), "hash") {
				t.Errorf("%s.%s (%s) could carry a hash", typ.Name(), f.Name, f.Type)
			}
		}
	}

	// Nothing any call returns mentions the hash, in any common spelling.
	authenticated, err := s.AuthenticateToken(ctx, secret)
	if err != nil {
		t.Fatal(err)
	}
	listed, err := s.ListTokens(ctx, acme.ID)
	if err != nil {
		t.Fatal(err)
	}
	spellings := []string{
		string(sum[:]),
		hex.EncodeToString(sum[:]),
		strings.ToUpper(hex.EncodeToString(sum[:])),
		base64.StdEncoding.EncodeToString(sum[:]),
		base64.RawStdEncoding.EncodeToString(sum[:]),
		base64.RawURLEncoding.EncodeToString(sum[:]),
		base32.StdEncoding.EncodeToString(sum[:]),
	}
	for name, v := range map[string]any{"CreateToken": created, "AuthenticateToken": authenticated, "ListTokens": listed} {
		js, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		for _, out := range []string{string(js), fmt.Sprintf("%+v", v), fmt.Sprintf("%#v", v)} {
			for _, h := range spellings {
				if strings.Contains(out, h) {
					t.Errorf("%s returned the hash (as %q): %s", name, h, out)
				}
			}
			if strings.Contains(out, secret) {
				t.Errorf("%s returned the secret: %s", name, out)
			}
		}
	}
}

func TestTokenOwners(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newStore(t)
	acme := newTenant(t, s, "acme")
	other := newTenant(t, s, "other")
	dev, err := s.CreateUser(ctx, store.NewUser{TenantID: acme.ID, Email: "dev@acme.test", Role: store.RoleAdmin})
	if err != nil {
		t.Fatal(err)
	}
	op, err := s.CreateUser(ctx, store.NewUser{Email: "ops@bex.test", Role: store.RoleOperator})
	if err != nil {
		t.Fatal(err)
	}

	secret, opToken, err := s.CreateToken(ctx, "", op.ID, "fleet")
	if err != nil {
		t.Fatalf("an operator's token: %v", err)
	}
	if got, err := s.AuthenticateToken(ctx, secret); err != nil || got.TenantID != "" || got.UserID != op.ID {
		t.Errorf("AuthenticateToken(operator's) = %+v, %v", got, err)
	}
	if ops, err := s.ListTokens(ctx, ""); err != nil || len(ops) != 1 || ops[0].ID != opToken.ID {
		t.Errorf("ListTokens(\"\") = %+v, %v; want the operator's token", ops, err)
	}

	tests := []struct {
		name             string
		tenantID, userID string
		want             error
	}{
		{"nobody", "", "", store.ErrInvalid},
		{"tenant user without tenant", "", dev.ID, store.ErrInvalid},
		{"user of another tenant", other.ID, dev.ID, store.ErrInvalid},
		{"operator with a tenant", acme.ID, op.ID, store.ErrInvalid},
		{"missing tenant", "00000000-0000-0000-0000-000000000000", "", store.ErrNotFound},
		{"malformed tenant", "acme", "", store.ErrNotFound},
		{"missing user", acme.ID, "00000000-0000-0000-0000-000000000000", store.ErrNotFound},
	}
	for _, tt := range tests {
		if _, _, err := s.CreateToken(ctx, tt.tenantID, tt.userID, "t"); !errors.Is(err, tt.want) {
			t.Errorf("%s: err = %v, want %v", tt.name, err, tt.want)
		}
	}
	if _, _, err := s.CreateToken(ctx, acme.ID, "", " "); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("empty name: err = %v, want ErrInvalid", err)
	}
}

// TestSessionTokens: a session token acts as its parent does, and ends
// when revoked, when it expires and when its parent is revoked.
func TestSessionTokens(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newStore(t)
	acme := newTenant(t, s, "acme")
	parentSecret, _, err := s.CreateToken(ctx, acme.ID, "", "ci")
	if err != nil {
		t.Fatal(err)
	}
	parent, err := s.AuthenticateToken(ctx, parentSecret)
	if err != nil {
		t.Fatal(err)
	}
	open := func() (string, store.Token) {
		t.Helper()
		secret, tok, err := s.CreateSessionToken(ctx, parent, time.Now().Add(time.Hour))
		if err != nil {
			t.Fatalf("CreateSessionToken: %v", err)
		}
		return secret, tok
	}
	authenticates := func(secret string) bool {
		t.Helper()
		_, err := s.AuthenticateToken(ctx, secret)
		if err != nil && !errors.Is(err, store.ErrUnauthenticated) {
			t.Fatal(err)
		}
		return err == nil
	}

	secret, sess := open()
	if !sess.Session() || sess.ParentID != parent.ID || sess.TenantID != acme.ID || sess.Name != "ci" || sess.ExpiresAt == nil {
		t.Errorf("session token = %+v", sess)
	}
	if !authenticates(secret) {
		t.Fatal("a fresh session token was refused")
	}
	if _, _, err := s.CreateSessionToken(ctx, sess, time.Now().Add(time.Hour)); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("a session from a session: err = %v, want ErrInvalid", err)
	}
	// Signing out.
	if err := s.RevokeToken(ctx, acme.ID, sess.ID); err != nil {
		t.Fatal(err)
	}
	if authenticates(secret) {
		t.Error("a revoked session token still authenticates")
	}
	// Expiry.
	secret, sess = open()
	if _, err := s.Pool().Exec(ctx, "UPDATE api_tokens SET expires_at = now() - interval '1 second' WHERE id = $1", sess.ID); err != nil {
		t.Fatal(err)
	}
	if authenticates(secret) {
		t.Error("an expired session token still authenticates")
	}
	// The parent revoked.
	secret, _ = open()
	if err := s.RevokeToken(ctx, acme.ID, parent.ID); err != nil {
		t.Fatal(err)
	}
	if authenticates(secret) {
		t.Error("a session token of a revoked token still authenticates")
	}
	if _, _, err := s.CreateSessionToken(ctx, parent, time.Now().Add(time.Hour)); !errors.Is(err, store.ErrUnauthenticated) {
		t.Errorf("a session from a revoked token: err = %v, want ErrUnauthenticated", err)
	}
}

// TestTokenScopesAndExpiry: a token keeps its scope and expiry, ends when
// it expires (its sessions too), and an owner has at most
// MaxTokensPerOwner tokens that have not ended.
func TestTokenScopesAndExpiry(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newStore(t)
	acme := newTenant(t, s, "acme")
	dev, err := s.CreateUser(ctx, store.NewUser{TenantID: acme.ID, Email: "dev@acme.test", Role: store.RoleDeveloper})
	if err != nil {
		t.Fatal(err)
	}
	in := time.Now().Add(time.Hour)
	secret, tok, err := s.IssueToken(ctx, store.NewToken{TenantID: acme.ID, UserID: dev.ID, Name: "ci", Scope: store.ScopeRead, ExpiresAt: in})
	if err != nil {
		t.Fatal(err)
	}
	if tok.Scope != store.ScopeRead || tok.ExpiresAt == nil || !tok.ExpiresAt.Equal(in.Truncate(time.Microsecond)) || tok.Session() {
		t.Errorf("token = %+v", tok)
	}
	sess, st, err := s.CreateSessionToken(ctx, tok, time.Now().Add(2*time.Hour))
	if err != nil || st.Scope != store.ScopeRead {
		t.Fatalf("a session of a read token: %+v, %v; want scope read", st, err)
	}
	if got, err := s.AuthenticateToken(ctx, secret); err != nil || got.Scope != store.ScopeRead {
		t.Errorf("AuthenticateToken = %+v, %v", got, err)
	}
	if _, err := s.Pool().Exec(ctx, "UPDATE api_tokens SET expires_at = now() - interval '1 second' WHERE id = $1", tok.ID); err != nil {
		t.Fatal(err)
	}
	for name, sec := range map[string]string{"expired token": secret, "session of an expired token": sess} {
		if _, err := s.AuthenticateToken(ctx, sec); !errors.Is(err, store.ErrUnauthenticated) {
			t.Errorf("%s: err = %v, want ErrUnauthenticated", name, err)
		}
	}
	for _, tt := range []struct {
		name string
		nt   store.NewToken
	}{
		{"unknown scope", store.NewToken{TenantID: acme.ID, Name: "x", Scope: "admin"}},
		{"expiry passed", store.NewToken{TenantID: acme.ID, Name: "x", ExpiresAt: time.Now().Add(-time.Minute)}},
		{"long name", store.NewToken{TenantID: acme.ID, Name: strings.Repeat("x", 65)}},
		{"control character", store.NewToken{TenantID: acme.ID, Name: "a\x1bb"}},
	} {
		if _, _, err := s.IssueToken(ctx, tt.nt); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("%s: err = %v, want ErrInvalid", tt.name, err)
		}
	}

	// The expired token does not count; the revoked ones neither.
	for i := range store.MaxTokensPerOwner {
		if _, _, err := s.CreateToken(ctx, acme.ID, dev.ID, fmt.Sprintf("t%d", i)); err != nil {
			t.Fatalf("token %d: %v", i, err)
		}
	}
	var qe *store.QuotaError
	_, _, err = s.CreateToken(ctx, acme.ID, dev.ID, "one more")
	if !errors.As(err, &qe) || qe.Quota != "tokens" {
		t.Fatalf("past %d tokens: err = %v, want the tokens quota", store.MaxTokensPerOwner, err)
	}
	if _, _, err := s.CreateToken(ctx, acme.ID, "", "machine"); err != nil {
		t.Errorf("a machine token of the same tenant: %v", err)
	}
	list, err := s.ListTokens(ctx, acme.ID)
	if err != nil {
		t.Fatal(err)
	}
	var t0 store.Token
	for _, tk := range list {
		if tk.Name == "t0" {
			t0 = tk
		}
	}
	if err := s.RevokeToken(ctx, acme.ID, t0.ID); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.CreateToken(ctx, acme.ID, dev.ID, "after a revocation"); err != nil {
		t.Errorf("after revoking one: %v", err)
	}
	if got, err := s.GetToken(ctx, acme.ID, t0.ID); err != nil || !got.Revoked() {
		t.Errorf("GetToken of the revoked one = %+v, %v", got, err)
	}
	if _, err := s.GetToken(ctx, "", t0.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetToken as no tenant: err = %v, want ErrNotFound", err)
	}
}
