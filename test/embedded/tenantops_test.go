package embedded_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"bex.co/bex/test/platformtest"
	"bex.co/bex/web/api/apiclient"
)

// nodeApp is an app of the dev tenant whose source is a Node app in a git
// repository of the test's, pushed to the platform with the real git
// client, as a tenant does.
type nodeApp struct {
	name   string
	dir    string
	remote string
	dev    *apiclient.Client
	apps   *http.Client
	host   string
	// body is what the app answers on / now.
	body string
}

// nodeServer is the app's server.js: it answers %q on every path but /env,
// where it answers its GREETING variable ("unset" without one), and prints
// a line for each request with the variable's value, one on stderr for
// each request of /env, and one when it listens.
const nodeServer = `const body = %q;
require("http").createServer((req, res) => {
  console.log("served", req.url, "GREETING=" + (process.env.GREETING || ""));
  if (req.url.startsWith("/env")) console.error("asked", req.url);
  res.end(req.url.startsWith("/env") ? (process.env.GREETING || "unset") : body);
}).listen(process.env.PORT);
console.log("listening on", process.env.PORT);
`

// pushNodeApp creates the dev tenant's app name and pushes a Node app that
// answers body, until it is released as v1.
func pushNodeApp(t *testing.T, env map[string]string, name, body string) *nodeApp {
	t.Helper()
	dev, err := apiclient.New(env["BEX_API"], env["BEX_TOKEN"], nil)
	if err != nil {
		t.Fatal(err)
	}
	created, err := dev.CreateApp(t.Context(), apiclient.CreateAppRequest{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	remote, err := url.Parse(created.GitRemote)
	if err != nil {
		t.Fatal(err)
	}
	remote.User = url.UserPassword("bex", env["BEX_TOKEN"])
	a := &nodeApp{name: name, dir: t.TempDir(), remote: remote.String(), dev: dev,
		apps: platformtest.AppClient(t, env), host: name + "-dev." + strings.Split(env["BEX_DOMAIN"], ":")[0]}
	platformtest.Git(t, a.dir, "init", "-q", "-b", "main")
	if n := a.push(t, body); n != 1 {
		t.Fatalf("the first push of %s released v%d, want v1", name, n)
	}
	return a
}

var releasedRE = regexp.MustCompile(`Released v(\d+)`)

// push commits a server that answers body and pushes it, and returns the
// release the push says it made.
func (a *nodeApp) push(t *testing.T, body string) int {
	t.Helper()
	platformtest.WriteNodeApp(t, a.dir, body, "")
	if err := os.WriteFile(filepath.Join(a.dir, "server.js"), []byte(fmt.Sprintf(nodeServer, body)), 0o644); err != nil {
		t.Fatal(err)
	}
	platformtest.Git(t, a.dir, "add", ".")
	platformtest.Git(t, a.dir, "commit", "-q", "-m", body)
	out, err := platformtest.GitErr(a.dir, "push", a.remote, "main")
	m := releasedRE.FindStringSubmatch(out)
	if err != nil || m == nil {
		t.Fatalf("pushing %s: %v\n%s", a.name, err, out)
	}
	for line := range strings.Lines(out) {
		if strings.Contains(line, "Timings:") {
			t.Logf("the push of %s: %s", a.name, strings.TrimSpace(line))
		}
	}
	a.body = body
	n, _ := strconv.Atoi(m[1])
	return n
}

// get asks the app for path through the edge.
func (a *nodeApp) get(ctx context.Context, path string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	code, got, err := platformtest.GetAppPath(ctx, a.apps, a.host, path)
	if err != nil {
		return "", err
	}
	if code != http.StatusOK {
		return "", fmt.Errorf("GET %s: %d %q", path, code, got)
	}
	return got, nil
}

// waitServes waits a minute at most until the app answers want on path,
// and fails t (going on) if it does not.
func (a *nodeApp) waitServes(t *testing.T, path, want string) {
	t.Helper()
	var got string
	var err error
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if got, err = a.get(t.Context(), path); err == nil && got == want {
			return
		}
	}
	t.Errorf("%s answers %q, %v on %s, want %q", a.name, got, err, path, want)
}

// tenantView is what a tenant saw of an app through the API in one round
// of tenantOps, in the terms that must not depend on the runtime that
// serves it: which fields are filled, the shape of names (digits as N),
// release numbers relative to the release before the round (+0).
type tenantView struct {
	// App is the fields of bex apps info filled, and its status.
	App string
	// Releases are the round's releases: number, kind, rollback target,
	// status, description.
	Releases []string
	// Instances are bex ps's instances after each step: name, release,
	// state, and the fields filled; Message the runtime's message.
	Instances []string
	Message   string
	// StatusMessage is bex apps info's status message after the push.
	StatusMessage string
	// LogLine is the fields filled of the app's own line in bex logs, its
	// process and instance; LogFollowed the same of a line bex logs -f
	// brought as it was printed.
	LogLine     string
	LogFollowed string
	// ErrLine is the same of the line the app printed on stderr.
	ErrLine string
	// SystemLine is the same of the platform's line (stream bex) about
	// the instance: it started, it is healthy.
	SystemLine string
	// Refusal is the status and message of a rollback to a release the
	// app never had.
	Refusal string
	// AfterPush is what the app answers on /env after the round's push:
	// the value the rollback brought back, or the round's value.
	AfterPush string
}

var (
	digitsRE = regexp.MustCompile(`\d+`)
	// commitRE is a push's release description, which names its commit.
	commitRE = regexp.MustCompile(`^Deploy [0-9a-f]+$`)
)

// shape is s with every number written N.
func shape(s string) string { return digitsRE.ReplaceAllString(s, "N") }

// tenantOps runs one round of a tenant's day-to-day operations on a, which
// runs on cluster, through the API as bex calls it: bex env set (a new
// release, its value served), bex logs and bex logs -f (the lines the app
// printed, named as bex ps names its instances), bex rollback to the
// release before the change (the old value served, as a new release), a
// rollback to a release the app never had (refused) and a git push (its
// body served), each release checked in bex releases and bex ps, the app
// found on cluster throughout. round tells this round's values from
// another's; next is the body the round's push gives the app. It returns
// what the tenant saw, to compare with another round's on another runtime.
func tenantOps(t *testing.T, a *nodeApp, cluster, round, next string) tenantView {
	t.Helper()
	ctx := t.Context()
	var v tenantView
	info, err := a.dev.GetApp(ctx, a.name)
	if err != nil {
		t.Fatal(err)
	}
	n := int(info.CurrentRelease)
	if info.Cluster != cluster || info.Status != "ready" || info.Placed != "placed" || n == 0 {
		t.Errorf("bex apps info %s before the round %s: cluster %q, status %q, placed %q, release %d; want %s, ready, placed", a.name, round, info.Cluster, info.Status, info.Placed, n, cluster)
	}
	v.App = fmt.Sprintf("%s %s url=%t placement=%t createdAt=%t plan=%t", info.Status, info.Placed, info.URL != "", info.Placement != "", !info.CreatedAt.IsZero(), info.Plan != "")
	before, err := a.get(ctx, "/env")
	if err != nil {
		t.Fatal(err)
	}

	// bex env set GREETING=…: a config release, its value served from the
	// cluster that runs the app.
	value := "hello from " + round
	_, rel, err := a.dev.PatchEnv(ctx, a.name, apiclient.PatchEnvRequest{Set: map[string]string{"GREETING": value}})
	if err != nil {
		t.Fatalf("bex env set GREETING on %s: %v", cluster, err)
	}
	if rel != n+1 {
		t.Errorf("bex env set on %s released v%d, want v%d", cluster, rel, n+1)
	}
	a.waitServes(t, "/env", value)
	v.Instances = append(v.Instances, a.running(t, cluster, n+1))

	// bex logs: the line the app printed for a request, from the instance
	// bex ps names; bex logs -f: a line printed while it follows.
	path := "/env?" + url.QueryEscape(round)
	if _, err := a.get(ctx, path); err != nil {
		t.Fatal(err)
	}
	want := "served " + path + " GREETING=" + value
	line, ok := a.logLine(t, want)
	if !ok {
		t.Errorf("bex logs of %s on %s has no line %q", a.name, cluster, want)
	}
	v.LogLine = a.logView(t, line, n+1)
	errLine, ok := a.lastLine(t, func(l apiclient.LogLine) bool { return l.Text == "asked "+path })
	if !ok || errLine.Stream != "stderr" {
		t.Errorf("bex logs of %s on %s: the line printed on stderr %+v (found %t), want it on stream stderr", a.name, cluster, errLine, ok)
	}
	v.ErrLine = a.logView(t, errLine, n+1)
	v.SystemLine = a.logView(t, a.systemLine(t, cluster, n+1), n+1)
	followed, ok := a.followLine(t, "/env?followed-"+url.QueryEscape(round))
	if !ok {
		t.Errorf("bex logs -f of %s on %s brought no line of a request made while it followed", a.name, cluster)
	}
	v.LogFollowed = a.logView(t, followed, n+1)

	// bex rollback vN: the value before the change served again, as a new
	// release.
	rb, err := a.dev.Rollback(ctx, a.name, n)
	if err != nil {
		t.Fatalf("bex rollback v%d on %s: %v", n, cluster, err)
	}
	if rb.Release != n+2 || rb.RolledBackTo != n {
		t.Errorf("bex rollback v%d on %s = %+v, want release v%d rolled back to v%d", n, cluster, rb, n+2, n)
	}
	a.waitServes(t, "/env", before)
	v.Instances = append(v.Instances, a.running(t, cluster, n+2))

	// A rollback to a release the app never had is refused, and changes
	// nothing.
	if _, err := a.dev.Rollback(ctx, a.name, n+100); err == nil {
		t.Errorf("bex rollback v%d on %s, a release %s never had, succeeded", n+100, cluster, a.name)
	} else {
		status := 0
		if e := (*apiclient.Error)(nil); errors.As(err, &e) {
			status = e.Status
		}
		v.Refusal = fmt.Sprintf("%d %s", status, shape(err.Error()))
	}

	// git push: the new body served, as the next release.
	if got := a.push(t, next); got != n+3 {
		t.Errorf("a push to %s on %s released v%d, want v%d", a.name, cluster, got, n+3)
	}
	a.waitServes(t, "/", next)
	v.Instances = append(v.Instances, a.running(t, cluster, n+3))
	switch after, err := a.get(ctx, "/env"); {
	case err != nil:
		t.Fatal(err)
	case after == before:
		v.AfterPush = "the value rolled back to"
	case after == value:
		v.AfterPush = "the value set"
	default:
		v.AfterPush = after
	}
	// The rollback gave the App the variables of the release it went back
	// to: the push keeps them.
	if v.AfterPush != "the value rolled back to" {
		t.Errorf("after a rollback to v%d and a push on %s, %s answers %q on /env, want %q as v%d had", n, cluster, a.name, v.AfterPush, before, n)
	}

	rs, err := a.dev.ListReleases(ctx, a.name)
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(rs, func(x, y apiclient.Release) int { return x.Number - y.Number })
	for _, r := range rs {
		if r.Number <= n {
			continue
		}
		to := ""
		if r.RollbackTo != 0 {
			to = fmt.Sprintf(" to +%d", r.RollbackTo-n)
		}
		description := shape(commitRE.ReplaceAllString(r.Description, "Deploy COMMIT"))
		v.Releases = append(v.Releases, fmt.Sprintf("+%d %s%s %s current=%t %q build=%t", r.Number-n, r.Kind, to, r.Status, r.Current, description, r.Build != 0))
	}
	wantReleases := []string{
		`+1 config superseded current=false "Set GREETING"`,
		`+2 rollback to +0 superseded current=false "Rollback to vN"`,
		`+3 deploy current current=true "Deploy COMMIT"`,
	}
	if len(v.Releases) != len(wantReleases) {
		t.Errorf("bex releases of %s on %s after v%d: %q, want %d", a.name, cluster, n, v.Releases, len(wantReleases))
	} else {
		for i, w := range wantReleases {
			if !strings.HasPrefix(v.Releases[i], w) {
				t.Errorf("bex releases of %s on %s: +%d is %q, want %q…", a.name, cluster, i+1, v.Releases[i], w)
			}
		}
	}
	is, err := a.dev.Instances(ctx, a.name)
	if err != nil {
		t.Fatal(err)
	}
	v.Message = shape(is.Message)
	// bex apps info says what bex ps says once the App controller saw the
	// push's release.
	platformtest.Eventually(t, time.Minute, fmt.Sprintf("bex apps info %s: v%d ready", a.name, n+3), func(ctx context.Context) error {
		info, err := a.dev.GetApp(ctx, a.name)
		if err != nil {
			return err
		}
		if info.Status != "ready" || !strings.HasPrefix(info.StatusMessage, fmt.Sprintf("release %d:", n+3)) {
			return fmt.Errorf("%s: %s", info.Status, info.StatusMessage)
		}
		v.StatusMessage = shape(info.StatusMessage)
		return nil
	})
	return v
}

// running waits until bex ps says that release runs on cluster, every
// instance up, and returns its instances' shape.
func (a *nodeApp) running(t *testing.T, cluster string, release int) string {
	t.Helper()
	var got string
	platformtest.Eventually(t, 2*time.Minute, fmt.Sprintf("bex ps of %s: v%d up on %s", a.name, release, cluster), func(ctx context.Context) error {
		is, err := a.dev.Instances(ctx, a.name)
		if err != nil {
			return err
		}
		if is.Cluster != cluster || is.Release != release || !is.Ready || len(is.Instances) == 0 {
			return fmt.Errorf("cluster %q, release %d, ready %t, %d instances: %s", is.Cluster, is.Release, is.Ready, len(is.Instances), is.Message)
		}
		var shapes []string
		for _, i := range is.Instances {
			if i.Release != release || i.State != apiclient.InstanceUp {
				return fmt.Errorf("%s (%s) of v%d is %s", i.Name, i.ID, i.Release, i.State)
			}
			shapes = append(shapes, fmt.Sprintf("%s %s id=%t since=%t restarts=%d", shape(i.Name), i.Process, i.ID != "", !i.Since.IsZero(), i.Restarts))
		}
		got = strings.Join(shapes, "; ")
		return nil
	})
	return got
}

// logLine waits until bex logs (its last 100 lines) has a line of the app
// that ends with text.
func (a *nodeApp) logLine(t *testing.T, text string) (apiclient.LogLine, bool) {
	t.Helper()
	return a.lastLine(t, func(l apiclient.LogLine) bool { return strings.HasSuffix(l.Text, text) })
}

// systemLine waits until bex logs (its last 100 lines) has a line of the
// platform's (stream bex) about an instance of release that bex ps names,
// and returns the newest; it fails t (going on) if none comes.
func (a *nodeApp) systemLine(t *testing.T, cluster string, release int) apiclient.LogLine {
	t.Helper()
	names := a.instances(t, release)
	found, ok := a.lastLine(t, func(l apiclient.LogLine) bool {
		return l.Stream == "bex" && slices.Contains(names, l.Process+"."+l.Instance)
	})
	if !ok {
		t.Errorf("bex logs of %s on %s has no line of the platform's about an instance of v%d (%v)", a.name, cluster, release, names)
	}
	return found
}

// lastLine waits a minute at most until bex logs (its last 100 lines) has
// a line match takes, and returns the newest such.
func (a *nodeApp) lastLine(t *testing.T, match func(apiclient.LogLine) bool) (apiclient.LogLine, bool) {
	t.Helper()
	var found apiclient.LogLine
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(time.Second) {
		err := a.dev.Logs(t.Context(), a.name, 100, false, func(l apiclient.LogLine) error {
			if match(l) {
				found = l
			}
			return nil
		})
		if err != nil {
			t.Fatalf("bex logs %s: %v", a.name, err)
		}
		if found.Text != "" {
			return found, true
		}
	}
	return found, false
}

// followLine follows the app's log (bex logs -f with the last line only)
// and, once that line came (the follow runs), asks the app for path until
// the line the app prints for it comes; lines of requests made before are
// in no follow's first line, which is not taken.
func (a *nodeApp) followLine(t *testing.T, path string) (apiclient.LogLine, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	lines := make(chan apiclient.LogLine, 100)
	done := make(chan error, 1)
	go func() {
		done <- a.dev.Logs(ctx, a.name, 1, true, func(l apiclient.LogLine) error {
			select {
			case lines <- l:
			default:
			}
			return nil
		})
	}()
	ended := func(err error) (apiclient.LogLine, bool) {
		if ctx.Err() == nil {
			t.Errorf("bex logs -f %s ended: %v", a.name, err)
		}
		return apiclient.LogLine{}, false
	}
	select {
	case <-lines:
	case err := <-done:
		return ended(err)
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		if _, err := a.get(ctx, path); err != nil && ctx.Err() == nil {
			t.Logf("GET %s while following: %v", path, err)
		}
	wait:
		for {
			select {
			case l := <-lines:
				if strings.Contains(l.Text, "served "+path+" ") {
					cancel()
					<-done
					return l, true
				}
			case err := <-done:
				return ended(err)
			case <-tick.C:
				break wait
			}
		}
	}
}

// instances are the names bex ps gives the instances of release.
func (a *nodeApp) instances(t *testing.T, release int) []string {
	t.Helper()
	is, err := a.dev.Instances(t.Context(), a.name)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, i := range is.Instances {
		if i.Release == release {
			names = append(names, i.Name)
		}
	}
	return names
}

// logView checks l, a line the app printed while release ran, against
// bex ps (its process and instance are an instance's there) and returns
// its shape: the fields filled, its process, stream and instance.
func (a *nodeApp) logView(t *testing.T, l apiclient.LogLine, release int) string {
	t.Helper()
	if l.Text == "" {
		return ""
	}
	names := a.instances(t, release)
	if !slices.Contains(names, l.Process+"."+l.Instance) {
		t.Errorf("bex logs of %s: %q from %s.%s, not an instance of v%d in bex ps (%v)", a.name, l.Text, l.Process, l.Instance, release, names)
	}
	if age := time.Since(l.Time); age < -time.Minute || age > 5*time.Minute {
		t.Errorf("bex logs of %s: %q at %s, %s ago", a.name, l.Text, l.Time, age)
	}
	return fmt.Sprintf("%s.%s %s time=%t", l.Process, shape(l.Instance), l.Stream, !l.Time.IsZero())
}

// sameView fails t where two rounds of tenantOps saw different things.
func sameView(t *testing.T, fleet, local tenantView) {
	t.Helper()
	fv, lv := reflect.ValueOf(fleet), reflect.ValueOf(local)
	for i := range fv.NumField() {
		f, l := fv.Field(i).Interface(), lv.Field(i).Interface()
		if !reflect.DeepEqual(f, l) {
			t.Errorf("%s differs: on the fleet %q, on local %q", fv.Type().Field(i).Name, f, l)
		}
	}
}
