package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
	"bex.co/bex/cmd/internal/cmdtest"
	"bex.co/bex/internal/controlplane/cptest"
	"bex.co/bex/internal/pgtest"
	"bex.co/bex/internal/store"
	"bex.co/bex/test/platformtest"
	"bex.co/bex/web/api/apiclient"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestCommandLine: a flag bex-web does not know, a missing required one
// and values out of range are refused with exit code 2 and a message
// naming the flag.
func TestCommandLine(t *testing.T) {
	bin := cmdtest.Build(t, "bex-web")
	out, code := cmdtest.Run(t, bin, nil, "--listen-adress", ":1")
	if code != 2 || !strings.Contains(out, "unknown flag: --listen-adress") {
		t.Errorf("unknown flag: exit %d, output:\n%s", code, out)
	}
	out, code = cmdtest.Run(t, bin, []string{"BEX_DATABASE_URL=postgres://x@127.0.0.1:1/x", "DATABASE_URL="},
		"--app-domain", "apps.example.test", "--registry", "127.0.0.1:5000")
	if code != 2 || !strings.Contains(out, "--git-base is required") || strings.Contains(out, "--database-url") {
		t.Errorf("missing --git-base: exit %d, output:\n%s", code, out)
	}
	out, code = cmdtest.Run(t, bin, []string{"BEX_DATABASE_URL=postgres://x@127.0.0.1:1/x"},
		"--git-base", "https://git.example.test", "--app-domain", "apps.example.test", "--registry", "127.0.0.1:5000", "--max-log-streams-per-tenant", "0")
	if code != 2 || !strings.Contains(out, "--max-log-streams-per-tenant 0: want 1 or more") {
		t.Errorf("--max-log-streams-per-tenant 0: exit %d, output:\n%s", code, out)
	}
	out, code = cmdtest.Run(t, bin, []string{"BEX_DATABASE_URL=postgres://x@127.0.0.1:1/x"},
		"--git-base", "https://git.example.test", "--app-domain", "apps.example.test", "--registry", "127.0.0.1:5000", "--run-heartbeat", "5s", "--run-lost-after", "10s")
	if code != 2 || !strings.Contains(out, "--run-heartbeat 5s, --run-lost-after 10s: want a heartbeat above 0 and at least three of them") {
		t.Errorf("--run-lost-after of two heartbeats: exit %d, output:\n%s", code, out)
	}
	out, code = cmdtest.Run(t, bin, []string{"BEX_DATABASE_URL=postgres://x@127.0.0.1:1/x"},
		"--git-base", "https://git.example.test", "--app-domain", "apps.example.test", "--registry", "127.0.0.1:5000", "--edge-metrics", "bex-edge-metrics-pods")
	if code != 2 || !strings.Contains(out, `--edge-metrics "bex-edge-metrics-pods": want host:port`) || !strings.Contains(out, "--edge-metrics needs --edge-metrics-token-file") {
		t.Errorf("--edge-metrics without a port or a token: exit %d, output:\n%s", code, out)
	}
	short := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(short, []byte("too short"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, code = cmdtest.Run(t, bin, []string{"BEX_DATABASE_URL=postgres://x@127.0.0.1:1/x"},
		"--git-base", "https://git.example.test", "--app-domain", "apps.example.test", "--registry", "127.0.0.1:5000", "--cookie-key-file", short)
	if code != 1 || !strings.Contains(out, "--cookie-key-file") || !strings.Contains(out, "want 32 random bytes or 64 hex digits") {
		t.Errorf("a 9-byte cookie key: exit %d, output:\n%s", code, out)
	}
}

// TestServes runs bex-web against a real kube-apiserver and Postgres: the
// API's health answers 200 on --listen, the probes on --ops-listen, and a
// tenant's token creates an App through it (the object lands in the
// tenant's namespace, its remote is under --git-base); paths outside
// /api/v1/ are the dashboard's, which signs a tenant in through the API;
// the App's series are served (the sampler runs).
func TestServes(t *testing.T) {
	bin := cmdtest.Build(t, "bex-web")
	cp := cptest.Start(t)
	// Binaries built and the control plane up, the test itself is quick.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dbURL := pgtest.NewDatabase(t)
	st, err := store.Open(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	kube := platformtest.Client(t, cp.KubeconfigPath())
	token, _ := cmdtest.Tenant(ctx, t, st, kube, "acme")

	keyFile := filepath.Join(t.TempDir(), "cookie-key")
	if err := os.WriteFile(keyFile, []byte(strings.Repeat("ab", 32)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addrs := cmdtest.Addrs(t, 2)
	listen, ops := addrs[0], addrs[1]
	p := cmdtest.Start(t, bin, []string{"DATABASE_URL=", "BEX_DATABASE_URL=" + dbURL},
		"--kubeconfig", cp.KubeconfigPath(), "--workload-kubeconfig", cp.KubeconfigPath(),
		"--listen", listen, "--ops-listen", ops, "--work-dir", t.TempDir(),
		"--git-base", "https://git.example.test", "--app-domain", "apps.example.test",
		"--edge-address", "203.0.113.7", "--registry", "127.0.0.1:5000", "--cookie-key-file", keyFile)
	p.WaitOK(t, 3*time.Minute, "http://"+listen+"/api/v1/healthz")
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		if code, body, err := cmdtest.Get(ctx, "http://"+ops+path, ""); err != nil || code != http.StatusOK {
			t.Errorf("GET %s on --ops-listen: %d %v %s", path, code, err, body)
		}
	}
	// The dashboard answers every other path, and signs in through the
	// API on the same port.
	if code, body, err := cmdtest.Get(ctx, "http://"+listen+"/signin", ""); err != nil || code != http.StatusOK || !strings.Contains(body, `id="token"`) {
		t.Errorf("GET /signin: %d %v, want the sign-in form:\n%s", code, err, body)
	}
	// The form's CSRF secret and its cookie, as a browser keeps them.
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	form, err := noRedirect.Get("http://" + listen + "/signin")
	if err != nil {
		t.Fatal(err)
	}
	formBody, _ := io.ReadAll(form.Body)
	form.Body.Close()
	csrf := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindSubmatch(formBody)
	if csrf == nil {
		t.Fatalf("no CSRF field on the sign-in form:\n%s", formBody)
	}
	post, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+listen+"/signin",
		strings.NewReader(url.Values{"token": {token}, "csrf": {string(csrf[1])}}.Encode()))
	post.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for _, c := range form.Cookies() {
		post.AddCookie(&http.Cookie{Name: c.Name, Value: c.Value})
	}
	signin, err := noRedirect.Do(post)
	if err != nil {
		t.Fatal(err)
	}
	signin.Body.Close()
	if signin.StatusCode != http.StatusSeeOther || signin.Header.Get("Location") != "/apps" || !strings.Contains(signin.Header.Get("Set-Cookie"), "bex_session=") {
		t.Errorf("signing in on the dashboard: %d to %q, cookie %q", signin.StatusCode, signin.Header.Get("Location"), signin.Header.Get("Set-Cookie"))
	}

	body, _ := json.Marshal(apiclient.CreateAppRequest{Name: "hello"})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+listen+"/api/v1/apps", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var app apiclient.App
	if err := json.NewDecoder(resp.Body).Decode(&app); err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST /api/v1/apps: %d %v", resp.StatusCode, err)
	}
	if want := "https://git.example.test/acme/hello.git"; app.GitRemote != want {
		t.Errorf("gitRemote %q, want %q", app.GitRemote, want)
	}
	var obj platformv1alpha1.App
	if err := kube.Get(ctx, types.NamespacedName{Namespace: "acme", Name: "hello"}, &obj); err != nil {
		t.Errorf("the App the API created: %v", err)
	}
	// The app's series: bex-web samples the Apps (every 10 s), so the
	// route answers 200, not 501, once the app exists.
	code, series, err := cmdtest.Get(ctx, "http://"+listen+"/api/v1/apps/hello/metrics?since=1m", token)
	if err != nil || code != http.StatusOK {
		t.Fatalf("GET /api/v1/apps/hello/metrics: %d %v %s", code, err, series)
	}
	var m apiclient.AppMetrics
	if err := json.Unmarshal([]byte(series), &m); err != nil || m.App != "hello" || m.IntervalSeconds != 10 {
		t.Errorf("the app's series: %v %+v", err, m)
	}
}
