package gitaccess

import (
	"context"
	"errors"
	"fmt"

	"golang.org/x/crypto/ssh"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
	"bex.co/bex/builder/gitserver"
	"bex.co/bex/internal/store"
)

// Auth authenticates pushers with the store's API tokens (HTTP) and SSH
// keys. Operator tokens, which belong to no tenant, are refused. The actor
// a push is recorded under is the API's: the token's user's email, else
// token:<name>; sshkey:<name> for an SSH key. A credential pushes when it
// acts as a developer or admin, as the API's routes that deploy need: a
// token with its member's role (a machine token's is admin) narrowed by its
// scope, a key with the role of the member who added it (a key of the
// tenant's, added with a machine token, as a developer). A viewer's
// credential fetches and is refused pushes, with why.
type Auth struct{ Store *store.Store }

var _ gitserver.Authenticator = Auth{}

// AuthenticatePassword implements gitserver.Authenticator.
func (a Auth) AuthenticatePassword(ctx context.Context, _, password string) (gitserver.Principal, error) {
	tok, err := a.Store.AuthenticateToken(ctx, password)
	if errors.Is(err, store.ErrUnauthenticated) || (err == nil && tok.TenantID == "") {
		return gitserver.Principal{}, gitserver.ErrUnauthenticated
	}
	if err != nil {
		return gitserver.Principal{}, unavailable(err)
	}
	actor, role := "token:"+tok.Name, store.RoleAdmin
	if tok.UserID != "" {
		u, err := a.Store.GetUser(ctx, tok.UserID)
		if err != nil {
			return gitserver.Principal{}, unavailable(fmt.Errorf("reading the token's user: %w", err))
		}
		actor, role = u.Email, u.Role
	}
	p, err := a.principal(ctx, tok.TenantID, actor)
	if err != nil {
		return p, err
	}
	if acts := tok.Scope.Limit(role); !acts.Covers(store.RoleDeveloper) {
		p.PushDenied = fmt.Sprintf("your role in tenant %s is %s: pushing needs the developer role; an admin can change it (bex members set-role)", p.Tenant, role)
		if acts != role {
			p.PushDenied = fmt.Sprintf("the token's scope is %s, so it only reads: push with a token of scope write or full", tok.Scope)
		}
	}
	return p, nil
}

// AuthenticatePublicKey implements gitserver.Authenticator.
func (a Auth) AuthenticatePublicKey(ctx context.Context, key ssh.PublicKey) (gitserver.Principal, error) {
	k, err := a.Store.FindSSHKeyByFingerprint(ctx, ssh.FingerprintSHA256(key))
	if errors.Is(err, store.ErrNotFound) {
		return gitserver.Principal{}, gitserver.ErrUnauthenticated
	}
	if err != nil {
		return gitserver.Principal{}, unavailable(err)
	}
	p, err := a.principal(ctx, k.TenantID, "sshkey:"+k.Name)
	if err != nil || k.UserID == "" {
		return p, err
	}
	u, err := a.Store.GetUser(ctx, k.UserID)
	if errors.Is(err, store.ErrNotFound) {
		// Removed meanwhile: the key went with them.
		return gitserver.Principal{}, gitserver.ErrUnauthenticated
	}
	if err != nil {
		return gitserver.Principal{}, unavailable(fmt.Errorf("reading the key's member: %w", err))
	}
	if !u.Role.Covers(store.RoleDeveloper) {
		p.PushDenied = fmt.Sprintf("this key is %s's, whose role in tenant %s is %s: pushing needs the developer role; an admin can change it (bex members set-role)", u.Email, p.Tenant, u.Role)
	}
	return p, nil
}

func (a Auth) principal(ctx context.Context, tenantID, actor string) (gitserver.Principal, error) {
	t, err := a.Store.GetTenant(ctx, tenantID)
	if err != nil {
		return gitserver.Principal{}, unavailable(fmt.Errorf("reading tenant: %w", err))
	}
	return gitserver.Principal{Tenant: t.Name, Actor: actor}, nil
}

// unavailable marks err with gitserver.ErrUnavailable when it says the
// database is out of reach.
func unavailable(err error) error {
	if store.Unavailable(err) {
		return fmt.Errorf("%w: %w", gitserver.ErrUnavailable, err)
	}
	return err
}

// Repos says an app's repository exists when its App object does, in
// the tenant's namespace, and that its deploy branch is spec.source.branch
// (main when empty).
type Repos struct{ Kube client.Client }

var _ gitserver.Repos = Repos{}

// Lookup implements gitserver.Repos.
func (r Repos) Lookup(ctx context.Context, tenant, name string) (gitserver.RepoInfo, error) {
	app := &platformv1alpha1.App{}
	err := r.Kube.Get(ctx, types.NamespacedName{Namespace: tenant, Name: name}, app)
	if apierrors.IsNotFound(err) {
		return gitserver.RepoInfo{}, gitserver.ErrNotFound
	}
	if err != nil {
		return gitserver.RepoInfo{}, fmt.Errorf("reading app %s: %w", name, err)
	}
	branch := app.Spec.Source.Branch
	if branch == "" {
		branch = "main"
	}
	return gitserver.RepoInfo{DeployBranch: branch}, nil
}
