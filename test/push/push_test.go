package push_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
	"bex.co/bex/internal/pgtest"
	"bex.co/bex/test/platformtest"
)

// tenant is a user of the platform: the bex CLI with a token, and git.
type tenant struct {
	t       *testing.T
	bin     string
	env     map[string]string
	token   string
	home    string
	keyFile string
}

func (u *tenant) bex(args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(u.bin, "bex"), args...)
	cmd.Env = append(os.Environ(), "BEX_API="+u.env["BEX_API"], "BEX_TOKEN="+u.token, "XDG_CONFIG_HOME="+u.home, "HOME="+u.home)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (u *tenant) mustBex(args ...string) string {
	u.t.Helper()
	out, err := u.bex(args...)
	if err != nil {
		u.t.Fatalf("bex %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func (u *tenant) git(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_TERMINAL_PROMPT=0", "HOME="+u.home,
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
	if u.keyFile != "" {
		cmd.Env = append(cmd.Env, "GIT_SSH_COMMAND=ssh -i "+u.keyFile+" -o IdentitiesOnly=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR")
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (u *tenant) mustGit(dir string, args ...string) string {
	u.t.Helper()
	out, err := u.git(dir, args...)
	if err != nil {
		u.t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// remote is the HTTP git URL of an app with the token as password.
func (u *tenant) remote(tenantName, app string) string {
	base, _ := url.Parse(u.env["BEX_GIT"])
	base.User = url.UserPassword("bex", u.token)
	return base.String() + "/" + tenantName + "/" + app + ".git"
}

// writeApp writes a Go web app answering body on every path but /healthz.
func writeApp(t *testing.T, dir, body string, compiles bool) {
	t.Helper()
	src := fmt.Sprintf(`package main

import (
	"fmt"
	"net/http"
	"os"
)

func main() {
	http.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") })
	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, %q) })
	fmt.Println("listening on", os.Getenv("PORT"))
	http.ListenAndServe(":"+os.Getenv("PORT"), nil)
}
`, body)
	if !compiles {
		src = strings.Replace(src, "func main() {", "func main() {\n\tnotDefinedAnywhere()", 1)
	}
	must(t, os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example.com/hello\n\ngo 1.22\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o644))
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// get fetches an app through the edge's HTTPS port by its default hostname.
func get(ctx context.Context, c *http.Client, host string) (int, string, error) {
	return platformtest.GetApp(ctx, c, host)
}

func TestPushToLive(t *testing.T) {
	bin := platformtest.BuildBinaries(t, "bex-embedded", "bex", "bex-static")
	state := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	dbURL := pgtest.NewDatabase(t)
	p := platformtest.Start(ctx, t, bin, state, dbURL)
	env := p.WaitEnv(ctx, t)
	dev := &tenant{t: t, bin: bin, env: env, token: env["BEX_TOKEN"], home: t.TempDir()}
	host := "hello-dev." + strings.Split(env["BEX_DOMAIN"], ":")[0]
	apps := platformtest.AppClient(t, env)

	info := dev.mustBex("apps", "create", "hello")
	if !strings.Contains(info, "dev/hello.git") {
		t.Fatalf("apps create does not print the git remote:\n%s", info)
	}
	info = dev.mustBex("apps", "info", "hello")
	if !strings.Contains(info, "dev/hello.git") || !strings.Contains(info, host) {
		t.Fatalf("apps info lacks the remote or the URL %s:\n%s", host, info)
	}

	repo := t.TempDir()
	dev.mustGit(repo, "init", "-q", "-b", "main")
	writeApp(t, repo, "hello v1", true)
	dev.mustGit(repo, "add", ".")
	dev.mustGit(repo, "commit", "-q", "-m", "v1")

	t.Run("push over HTTP streams the build and goes live", func(t *testing.T) {
		out := dev.mustGit(repo, "push", dev.remote("dev", "hello"), "main")
		for _, want := range []string{"remote: ", "go build", "Released v1", host} {
			if !strings.Contains(out, want) {
				t.Fatalf("push output lacks %q:\n%s", want, out)
			}
		}
		if code, body, err := get(ctx, apps, host); err != nil || code != 200 || body != "hello v1" {
			t.Fatalf("GET %s = %d %q %v, want 200 \"hello v1\"", host, code, body, err)
		}
	})

	t.Run("curl with BEX_CA reaches the app over HTTPS, plain HTTP redirects", func(t *testing.T) {
		_, httpsPort, _ := strings.Cut(env["BEX_DOMAIN"], ":")
		out, err := exec.CommandContext(ctx, "curl", "-sS", "--cacert", env["BEX_CA"], "https://"+host+":"+httpsPort+"/").CombinedOutput()
		if err != nil || string(out) != "hello v1" {
			t.Fatalf("curl --cacert $BEX_CA https://%s:%s/ = %q, %v", host, httpsPort, out, err)
		}
		httpURL, err := url.Parse(env["BEX_HTTP"])
		must(t, err)
		out, err = exec.CommandContext(ctx, "curl", "-sS", "-o", "/dev/null", "-w", "%{http_code} %{redirect_url}",
			"http://"+host+":"+httpURL.Port()+"/path?q=1").CombinedOutput()
		if want := "308 https://" + host + ":" + httpsPort + "/path?q=1"; err != nil || string(out) != want {
			t.Fatalf("plain HTTP answered %q (%v), want %q", out, err, want)
		}
	})

	t.Run("second release under load loses no request", func(t *testing.T) {
		writeApp(t, repo, "hello v2", true)
		dev.mustGit(repo, "commit", "-q", "-am", "v2")
		var failures, total atomic.Int64
		var seenV2 atomic.Bool
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for n := 0; n < 20000; n++ {
					select {
					case <-stop:
						return
					default:
					}
					code, body, err := get(ctx, apps, host)
					total.Add(1)
					if err != nil || code != 200 || (body != "hello v1" && body != "hello v2") {
						failures.Add(1)
						t.Logf("failed request: %d %q %v", code, body, err)
					}
					if body == "hello v2" {
						seenV2.Store(true)
					}
				}
			}()
		}
		out := dev.mustGit(repo, "push", dev.remote("dev", "hello"), "main")
		// Keep the load on until v2 answers, then a little longer.
		platformtest.Eventually(t, 15*time.Minute, "v2 to answer", func(context.Context) error {
			if !seenV2.Load() {
				return fmt.Errorf("not in %d requests (%d failed)", total.Load(), failures.Load())
			}
			return nil
		})
		close(stop)
		wg.Wait()
		if !strings.Contains(out, "Released v2") {
			t.Fatalf("push output lacks Released v2:\n%s", out)
		}
		if failures.Load() != 0 {
			t.Fatalf("%d of %d requests failed during the switch", failures.Load(), total.Load())
		}
		t.Logf("%d requests during the switch, none failed", total.Load())
	})

	t.Run("a push that does not compile is refused and v2 keeps serving", func(t *testing.T) {
		writeApp(t, repo, "hello v3", false)
		dev.mustGit(repo, "commit", "-q", "-am", "broken")
		out, err := dev.git(repo, "push", dev.remote("dev", "hello"), "main")
		if err == nil {
			t.Fatalf("push of code that does not compile succeeded:\n%s", out)
		}
		if !strings.Contains(out, "notDefinedAnywhere") {
			t.Fatalf("push output lacks the compiler's error:\n%s", out)
		}
		if _, body, _ := get(ctx, apps, host); body != "hello v2" {
			t.Fatalf("after a failed build the app answers %q, want \"hello v2\"", body)
		}
		log := dev.mustBex("builds", "log", "hello")
		if !strings.Contains(log, "notDefinedAnywhere") {
			t.Fatalf("the failed build's log lacks the compiler error:\n%s", log)
		}
		dev.mustGit(repo, "reset", "-q", "--hard", "HEAD~1")
	})

	t.Run("a release that fails its health check never gets traffic", func(t *testing.T) {
		kube := platformtest.Client(t, env["BEX_KUBECONFIG"])
		app := &platformv1alpha1.App{}
		must(t, kube.Get(ctx, client.ObjectKey{Namespace: "dev", Name: "hello"}, app))
		base := app.DeepCopy()
		app.Spec.HealthCheck = &platformv1alpha1.HealthCheck{Path: "/healthz", IntervalSeconds: 1, TimeoutSeconds: 1, FailureThreshold: 2, SuccessThreshold: 1}
		must(t, kube.Patch(ctx, app, client.MergeFrom(base)))

		writeApp(t, repo, "hello sick", true)
		main := filepath.Join(repo, "main.go")
		src, err := os.ReadFile(main)
		must(t, err)
		sick := strings.Replace(string(src), `fmt.Fprint(w, "ok")`, `w.WriteHeader(http.StatusInternalServerError)`, 1)
		must(t, os.WriteFile(main, []byte(sick), 0o644))
		dev.mustGit(repo, "commit", "-q", "-am", "sick")

		var sickAnswers, failures, total atomic.Int64
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					code, body, err := get(ctx, apps, host)
					total.Add(1)
					switch {
					case err != nil || code != 200:
						failures.Add(1)
						t.Logf("failed request: %d %q %v", code, body, err)
					case body != "hello v2":
						sickAnswers.Add(1)
					}
				}
			})
		}
		out, err := dev.git(repo, "push", dev.remote("dev", "hello"), "main")
		close(stop)
		wg.Wait()
		if err == nil {
			t.Fatalf("push of an app failing its health check succeeded:\n%s", out)
		}
		if !strings.Contains(out, "health check") {
			t.Errorf("push output does not say the health check failed:\n%s", out)
		}
		// Heroku's way: the failed release keeps its number, v3.
		if !strings.Contains(out, "v3 is recorded as failed") {
			t.Errorf("push output does not say v3 is recorded as failed:\n%s", out)
		}
		if sickAnswers.Load() != 0 || failures.Load() != 0 {
			t.Fatalf("during the failed release %d of %d requests reached it and %d failed", sickAnswers.Load(), total.Load(), failures.Load())
		}
		t.Logf("%d requests during the failed release, all answered by v2", total.Load())
		platformtest.Eventually(t, 15*time.Minute, "the App to say the rollout failed", func(ctx context.Context) error {
			if err := kube.Get(ctx, client.ObjectKeyFromObject(app), app); err != nil {
				return err
			}
			if err := platformtest.HasCondition(app.Status.Conditions, platformv1alpha1.AppReleasedCondition, "", platformv1alpha1.AppRolloutFailedReason); err != nil {
				return err
			}
			if c := meta.FindStatusCondition(app.Status.Conditions, platformv1alpha1.AppReleasedCondition); !strings.Contains(c.Message, "health check") ||
				!strings.Contains(c.Message, "v2 keeps serving") {
				return fmt.Errorf("%s says %q, not that the health check failed and v2 keeps serving", c.Type, c.Message)
			}
			return nil
		})
		dev.mustGit(repo, "reset", "-q", "--hard", "HEAD~1")
	})

	t.Run("refusals", func(t *testing.T) {
		wrong := &tenant{t: t, bin: bin, env: env, token: "bex_wrongwrongwrong", home: t.TempDir()}
		if out, err := wrong.git(repo, "push", wrong.remote("dev", "hello"), "main"); err == nil || strings.Contains(out, "Released") {
			t.Fatalf("push with a wrong token succeeded:\n%s", out)
		}
		if out, err := wrong.bex("apps", "create", "sneaky"); err == nil {
			t.Fatalf("bex with a wrong token succeeded:\n%s", out)
		}
		if out := dev.mustBex("apps", "list"); strings.Contains(out, "sneaky") {
			t.Fatalf("a refused request created an app:\n%s", out)
		}

		op := &tenant{t: t, bin: bin, env: env, token: env["BEX_OPERATOR_TOKEN"], home: t.TempDir()}
		created := op.mustBex("admin", "tenant", "create", "other", "-o", "json")
		otherToken := between(created, `"token": "`, `"`)
		if otherToken == "" {
			otherToken = between(created, `"token":"`, `"`)
		}
		other := &tenant{t: t, bin: bin, env: env, token: otherToken, home: t.TempDir()}
		out, err := other.git(repo, "push", other.remote("dev", "hello"), "main")
		if err == nil || !strings.Contains(out, "not found") {
			t.Fatalf("another tenant's push to dev/hello: err=%v\n%s", err, out)
		}
		if out, err := other.bex("apps", "info", "hello"); err == nil {
			t.Fatalf("another tenant reads dev's app:\n%s", out)
		}

		out, err = dev.git(repo, "push", dev.remote("dev", "nosuchapp"), "main")
		if err == nil || !strings.Contains(out, "does not exist") {
			t.Fatalf("push to an app that does not exist: err=%v\n%s", err, out)
		}

		// Non-fast-forward: a clone one commit behind with a new commit.
		behind := t.TempDir()
		dev.mustGit(behind, "clone", "-q", dev.remote("dev", "hello"), ".")
		dev.mustGit(behind, "reset", "-q", "--hard", "HEAD~1")
		must(t, os.WriteFile(filepath.Join(behind, "NOTES"), []byte("diverged\n"), 0o644))
		dev.mustGit(behind, "add", ".")
		dev.mustGit(behind, "commit", "-q", "-m", "diverged")
		out, err = dev.git(behind, "push", dev.remote("dev", "hello"), "main")
		if err == nil || !strings.Contains(out, "rejected") {
			t.Fatalf("non-fast-forward push: err=%v\n%s", err, out)
		}
	})

	t.Run("push over SSH", func(t *testing.T) {
		dir := t.TempDir()
		_, key, err := ed25519.GenerateKey(rand.Reader)
		must(t, err)
		block, err := ssh.MarshalPrivateKey(key, "")
		must(t, err)
		dev.keyFile = filepath.Join(dir, "id_ed25519")
		must(t, os.WriteFile(dev.keyFile, pem.EncodeToMemory(block), 0o600))
		pub, err := ssh.NewPublicKey(key.Public())
		must(t, err)
		must(t, os.WriteFile(dev.keyFile+".pub", ssh.MarshalAuthorizedKey(pub), 0o644))
		dev.mustBex("keys", "add", dev.keyFile+".pub")

		writeApp(t, repo, "hello v4", true)
		dev.mustGit(repo, "commit", "-q", "-am", "v4")
		out := dev.mustGit(repo, "push", env["BEX_GIT_SSH"]+"/dev/hello.git", "main")
		// v3 is the release that failed its health check: pruned at this
		// release's prune for that, not by the retention.
		if !strings.Contains(out, "Released v4") {
			t.Fatalf("SSH push output lacks Released v4:\n%s", out)
		}
		if !strings.Contains(out, "Pruned v3: a failed release never runs") || strings.Contains(out, "Pruned v3: the platform keeps the last") {
			t.Errorf("SSH push output does not say failed v3 was pruned for failing:\n%s", out)
		}
		if _, body, _ := get(ctx, apps, host); body != "hello v4" {
			t.Fatalf("after the SSH push the app answers %q, want \"hello v4\"", body)
		}
	})

	t.Run("rollback brings back the previous release", func(t *testing.T) {
		out := dev.mustBex("rollback", "hello")
		if !strings.Contains(out, "v2") {
			t.Fatalf("rollback output does not name v2:\n%s", out)
		}
		if _, body, _ := get(ctx, apps, host); body != "hello v2" {
			t.Fatalf("after rollback the app answers %q, want \"hello v2\"", body)
		}
		if rel := dev.mustBex("releases", "hello"); !strings.Contains(rel, "v5") || !strings.Contains(strings.ToLower(rel), "rollback") {
			t.Fatalf("releases do not show the rollback as v5:\n%s", rel)
		}
	})

	t.Run("a Dockerfile app FROM scratch deploys in its sandbox", func(t *testing.T) {
		dev.mustBex("apps", "create", "scratch")
		dir := t.TempDir()
		writeApp(t, dir, "hello from scratch", true)
		repo := t.TempDir()
		build := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(repo, "server"), ".")
		build.Dir = dir
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("building the server: %v\n%s", err, out)
		}
		must(t, os.WriteFile(filepath.Join(repo, "Dockerfile"), []byte("FROM scratch\nCOPY server /server\nCMD [\"/server\"]\n"), 0o644))
		dev.mustGit(repo, "init", "-q", "-b", "main")
		dev.mustGit(repo, "add", ".")
		dev.mustGit(repo, "commit", "-q", "-m", "scratch")
		out := dev.mustGit(repo, "push", dev.remote("dev", "scratch"), "main")
		if !strings.Contains(out, "BuildKit") || !strings.Contains(out, "Released v1") {
			t.Fatalf("push output lacks the BuildKit build or the release:\n%s", out)
		}
		scratchHost := "scratch-dev." + strings.Split(env["BEX_DOMAIN"], ":")[0]
		if code, body, err := get(ctx, apps, scratchHost); err != nil || code != 200 || body != "hello from scratch" {
			t.Fatalf("GET %s = %d %q %v, want 200 \"hello from scratch\"", scratchHost, code, body, err)
		}
	})

	t.Run("a restarted platform serves the current release again", func(t *testing.T) {
		p.Interrupt(t)
		if _, _, err := get(ctx, apps, host); err == nil {
			t.Fatal("the edge still answers after the platform stopped")
		}
		p = platformtest.Start(ctx, t, bin, state, dbURL)
		env2 := p.WaitEnv(ctx, t)
		if env2["BEX_HTTPS"] != env["BEX_HTTPS"] || env2["BEX_CA"] != env["BEX_CA"] {
			t.Fatalf("the edge or its CA moved across restarts: %s %s → %s %s", env["BEX_HTTPS"], env["BEX_CA"], env2["BEX_HTTPS"], env2["BEX_CA"])
		}
		apps2 := platformtest.AppClient(t, env2)
		platformtest.Eventually(t, 15*time.Minute, "the app to answer after the restart", func(ctx context.Context) error {
			code, body, err := get(ctx, apps2, host)
			if err == nil && (code != http.StatusOK || body != "hello v2") {
				err = fmt.Errorf("GET %s: %d %q, want hello v2", host, code, body)
			}
			return err
		})
	})
}

func between(s, start, end string) string {
	i := strings.Index(s, start)
	if i < 0 {
		return ""
	}
	s = s[i+len(start):]
	j := strings.Index(s, end)
	if j < 0 {
		return ""
	}
	return s[:j]
}
