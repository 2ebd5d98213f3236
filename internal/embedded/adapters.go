package embedded

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"golang.org/x/crypto/ssh"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
	"bex.co/bex/builder/gitserver"
	"bex.co/bex/internal/edge"
	"bex.co/bex/internal/runtime"
	"bex.co/bex/internal/store"
	"bex.co/bex/web/api"
	"bex.co/bex/web/dashboard"
)

// gitAuth authenticates pushers with the store's tokens and SSH keys.
type gitAuth struct{ store *store.Store }

var _ gitserver.Authenticator = gitAuth{}

func (a gitAuth) AuthenticatePassword(ctx context.Context, _, password string) (gitserver.Principal, error) {
	tok, err := a.store.AuthenticateToken(ctx, password)
	if errors.Is(err, store.ErrUnauthenticated) || (err == nil && tok.TenantID == "") {
		return gitserver.Principal{}, gitserver.ErrUnauthenticated
	}
	if err != nil {
		return gitserver.Principal{}, err
	}
	return a.principal(ctx, tok.TenantID, "token "+tok.Name)
}

func (a gitAuth) AuthenticatePublicKey(ctx context.Context, key ssh.PublicKey) (gitserver.Principal, error) {
	k, err := a.store.FindSSHKeyByFingerprint(ctx, ssh.FingerprintSHA256(key))
	if errors.Is(err, store.ErrNotFound) {
		return gitserver.Principal{}, gitserver.ErrUnauthenticated
	}
	if err != nil {
		return gitserver.Principal{}, err
	}
	return a.principal(ctx, k.TenantID, "ssh key "+k.Name)
}

func (a gitAuth) principal(ctx context.Context, tenantID, actor string) (gitserver.Principal, error) {
	t, err := a.store.GetTenant(ctx, tenantID)
	if err != nil {
		return gitserver.Principal{}, fmt.Errorf("reading tenant: %w", err)
	}
	return gitserver.Principal{Tenant: t.Name, Actor: actor}, nil
}

// appRepos answers which apps exist: an App object in the tenant's namespace.
type appRepos struct{ kube client.Client }

var _ gitserver.Repos = appRepos{}

func (r appRepos) Lookup(ctx context.Context, tenant, name string) (gitserver.RepoInfo, error) {
	app := &platformv1alpha1.App{}
	err := r.kube.Get(ctx, types.NamespacedName{Namespace: tenant, Name: name}, app)
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

// runtimeLogs serves the API's runtime logs from the runtime driver.
type runtimeLogs struct{ driver runtime.Driver }

var _ api.LogSource = runtimeLogs{}

func (l runtimeLogs) Logs(ctx context.Context, tenant, app string, tail int, follow bool) (<-chan api.LogLine, error) {
	in, err := l.driver.Logs(ctx, tenant, app, tail, follow)
	if err != nil {
		return nil, err
	}
	out := make(chan api.LogLine)
	go func() {
		defer close(out)
		for line := range in {
			select {
			case out <- api.LogLine{Time: line.Time, Process: line.Process, Instance: strconv.Itoa(line.Instance), Stream: line.Stream, Text: line.Text}:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

// edgeTraffic gives the dashboard the edge's traffic per app.
type edgeTraffic struct{ rec *edge.TrafficRecorder }

func (t edgeTraffic) Traffic(tenant, app string) []dashboard.TrafficPoint {
	pts := t.rec.Traffic(tenant, app)
	out := make([]dashboard.TrafficPoint, len(pts))
	for i, p := range pts {
		out[i] = dashboard.TrafficPoint{At: p.At, Requests: p.Requests, Errors: p.Errors}
	}
	return out
}
