package gitaccess_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"bex.co/bex/builder/gitaccess"
	"bex.co/bex/builder/gitserver"
	"bex.co/bex/internal/controlplane/cptest"
	"bex.co/bex/internal/pgtest"
	"bex.co/bex/web/api/apiclient"
	"bex.co/bex/web/api/apitest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// releases is a gitserver.Deployer that releases every push at once and
// counts them.
type releases struct {
	mu sync.Mutex
	n  int
}

func (r *releases) Deploy(_ context.Context, push gitserver.Push, log io.Writer) (gitserver.DeployResult, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n++
	fmt.Fprintf(log, "-----> Released %s by %s\n", push.New[:7], push.Actor)
	return gitserver.DeployResult{Release: r.n, URL: "https://" + push.App + "-" + push.Tenant + ".example.test"}, nil
}

func (r *releases) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n
}

// gitClient runs the real git client, isolated from the machine's
// configuration, with an SSH key for ssh:// remotes.
type gitClient struct {
	t    *testing.T
	home string
	key  string
}

func (g gitClient) run(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "HOME="+g.home, "XDG_CONFIG_HOME="+g.home, "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0", "LC_ALL=C",
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com",
		"GIT_SSH_COMMAND=ssh -F /dev/null -i "+g.key+" -o IdentitiesOnly=yes -o BatchMode=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (g gitClient) must(dir string, args ...string) string {
	g.t.Helper()
	out, err := g.run(dir, args...)
	if err != nil {
		g.t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// refused runs git, which must fail with want in its output.
func (g gitClient) refused(what, want, dir string, args ...string) {
	g.t.Helper()
	out, err := g.run(dir, args...)
	if err == nil || !strings.Contains(out, want) {
		g.t.Errorf("%s: git %s: %v, want it refused with %q:\n%s", what, args[0], err, want, out)
	}
}

// TestRolesInGit runs the git receiver on the store's credentials and talks
// to it with the real git client, over HTTP and SSH: a developer pushes; a
// viewer, an admin's read-scoped token and the key of a member demoted to
// viewer fetch but are refused pushes with why; a token revoked through the
// API, an expired one and a removed member's token and key are refused on
// the very next git request.
func TestRolesInGit(t *testing.T) {
	e := apitest.Start(t, cptest.Start(t))
	ctx := t.Context()
	_, admin := e.TenantToken(t, "gitacme")
	api := func(token string) *apiclient.Client {
		c, err := apiclient.New(e.URL, token, nil)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	if _, err := api(admin).CreateApp(ctx, apiclient.CreateAppRequest{Name: "web"}); err != nil {
		t.Fatal(err)
	}
	dev := e.Member(t, admin, "dev@gitacme.test", "developer")
	viewer := e.Member(t, admin, "vic@gitacme.test", "viewer")

	rel := &releases{}
	srv, err := gitserver.New(gitserver.Options{
		Root: t.TempDir(), Auth: gitaccess.Auth{Store: e.Store}, Repos: gitaccess.Repos{Kube: e.Kube}, Deployer: rel,
	})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.HTTPHandler())
	t.Cleanup(hs.Close)
	sshAddr := serveSSH(t, srv)

	g := gitClient{t: t, home: t.TempDir()}
	g.key = filepath.Join(g.home, "id_ed25519")
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "dev@laptop", "-f", g.key).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v\n%s", err, out)
	}
	httpRemote := func(token string) string {
		u, _ := url.Parse(hs.URL + "/gitacme/web.git")
		u.User = url.UserPassword("git", token)
		return u.String()
	}
	sshRemote := "ssh://git@" + sshAddr + "/gitacme/web.git"
	work := t.TempDir()
	g.must(work, "init", "-q", "-b", "main")
	commit := func(msg string) {
		t.Helper()
		g.must(work, "commit", "-q", "--allow-empty", "-m", msg)
	}

	// A developer pushes; a viewer fetches, and is refused a push.
	commit("one")
	if out := g.must(work, "push", httpRemote(dev), "main"); !strings.Contains(out, "Released v1") {
		t.Errorf("the developer's push:\n%s", out)
	}
	g.must(g.home, "ls-remote", httpRemote(viewer))
	commit("two")
	g.refused("a viewer's push", "push refused: your role in tenant gitacme is viewer: pushing needs the developer role", work, "push", httpRemote(viewer), "main")
	read, err := api(admin).CreateToken(ctx, apiclient.CreateTokenRequest{Name: "read", Scope: "read"})
	if err != nil {
		t.Fatal(err)
	}
	g.refused("an admin's read-scoped token's push", "push refused: the token's scope is read, so it only reads", work, "push", httpRemote(read.Secret), "main")
	if n := rel.count(); n != 1 {
		t.Errorf("%d releases after the refused pushes, want 1", n)
	}

	// A token revoked through the API: refused on the next git request.
	laptop, err := api(dev).CreateToken(ctx, apiclient.CreateTokenRequest{Name: "laptop"})
	if err != nil {
		t.Fatal(err)
	}
	g.must(work, "push", httpRemote(laptop.Secret), "main")
	if err := api(dev).RevokeToken(ctx, laptop.Token.ID); err != nil {
		t.Fatal(err)
	}
	g.refused("the revoked token's next fetch", "Authentication failed", g.home, "ls-remote", httpRemote(laptop.Secret))
	commit("three")
	g.refused("the revoked token's next push", "Authentication failed", work, "push", httpRemote(laptop.Secret), "main")

	// An expired token, likewise.
	in := time.Now().Add(time.Hour)
	short, err := api(dev).CreateToken(ctx, apiclient.CreateTokenRequest{Name: "short", ExpiresAt: &in})
	if err != nil {
		t.Fatal(err)
	}
	g.must(g.home, "ls-remote", httpRemote(short.Secret))
	if _, err := e.Store.Pool().Exec(ctx, "UPDATE api_tokens SET expires_at = now() - interval '1 second' WHERE id = $1", short.Token.ID); err != nil {
		t.Fatal(err)
	}
	g.refused("the expired token's next fetch", "Authentication failed", g.home, "ls-remote", httpRemote(short.Secret))

	// A member's key has their role at the time of the push.
	pub, err := os.ReadFile(g.key + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := api(dev).AddSSHKey(ctx, apiclient.AddSSHKeyRequest{PublicKey: string(pub)}); err != nil {
		t.Fatal(err)
	}
	g.must(work, "push", sshRemote, "main")
	if _, err := api(admin).SetMemberRole(ctx, "dev@gitacme.test", "viewer"); err != nil {
		t.Fatal(err)
	}
	commit("four")
	g.refused("the key of a member demoted to viewer", "push refused: this key is dev@gitacme.test's, whose role in tenant gitacme is viewer", work, "push", sshRemote, "main")
	g.must(g.home, "ls-remote", sshRemote)
	g.refused("the demoted developer's token", "push refused: your role in tenant gitacme is viewer", work, "push", httpRemote(dev), "main")

	// A removed member's token and key: refused on the next request.
	if err := api(admin).RemoveMember(ctx, "dev@gitacme.test"); err != nil {
		t.Fatal(err)
	}
	g.refused("the removed member's token", "Authentication failed", g.home, "ls-remote", httpRemote(dev))
	g.refused("the removed member's key", "Permission denied", g.home, "ls-remote", sshRemote)
	if n := rel.count(); n != 3 {
		t.Errorf("%d releases, want 3 (the developer's pushes)", n)
	}
}

// serveSSH serves srv's SSH side on a free port until t ends and returns
// its address.
func serveSSH(t *testing.T, srv *gitserver.Server) string {
	t.Helper()
	hostKey, err := gitserver.LoadOrCreateHostKey(filepath.Join(t.TempDir(), "ssh_host_ed25519_key"))
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.ServeSSH(t.Context(), l, hostKey) }()
	t.Cleanup(func() {
		if err := <-served; err != nil {
			t.Errorf("ServeSSH: %v", err)
		}
	})
	return l.Addr().String()
}
