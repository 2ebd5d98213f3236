package pipeline_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"bex.co/bex/builder/gitserver"
	"bex.co/bex/builder/release"
	"bex.co/bex/internal/runtime"
	"bex.co/bex/internal/runtime/runtimetest"
	"bex.co/bex/internal/store"
	"bex.co/bex/test/platformtest"
)

// commitWithRelease commits the app answering body with a Procfile whose
// release line is phase, and returns its push.
func (e *env) commitWithRelease(t *testing.T, body, phase string) gitserver.Push {
	t.Helper()
	platformtest.WriteNodeApp(t, e.repo, body, "")
	if err := os.WriteFile(filepath.Join(e.repo, "Procfile"), []byte("web: node server.js\nrelease: "+phase+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return e.pushWork(t, body)
}

// buildLog is the log the store keeps of the app's newest build, and the
// build.
func (e *env) buildLog(t *testing.T, tenantID string) (store.Build, string) {
	t.Helper()
	builds, err := e.st.ListBuilds(t.Context(), tenantID, e.name, 1)
	if err != nil || len(builds) != 1 {
		t.Fatalf("builds: %v, %v", builds, err)
	}
	lines, err := e.st.BuildLogs(t.Context(), builds[0].ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(l.Line + "\n")
	}
	return builds[0], b.String()
}

// body is what the app answers on / through an edge.
func (e *env) body() (string, error) {
	return runtimetest.EdgeGet(e.rt, "apps.test", e.tenant, e.name, "/")
}

// TestReleasePhase, on a real build, store and process runtime: a
// Procfile's release line runs once, in the new release with its
// environment, after the build and before the release's instances start;
// its output is in the push output and the build log. One that exits
// non-zero, or outlasts its time limit, does not let the release out:
// the previous release keeps serving, the push fails with the exit status
// and the last lines, and the build record says why and keeps the log.
// A one-off run of the current release gets its environment, secrets
// included, and its exit status.
func TestReleasePhase(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	e := newEnv(t)
	tenantID := mustTenantID(t, e.st, e.tenant)
	e.setEnv(t, map[string]string{"FOO": "bar"}, map[string]string{"API_KEY": "s3cret"})

	var out platformtest.SyncBuffer
	res, err := e.a.Deploy(ctx, e.commitWithRelease(t, "v1", `echo "migrating with $FOO"; echo to stderr >&2`), &out)
	if err != nil || res.Release != 1 {
		t.Fatalf("a push with a release phase that passes: v%d, %v\n%s", res.Release, err, out.String())
	}
	push := out.String()
	phase := strings.Index(push, "-----> Running the release phase: echo")
	ran := strings.Index(push, "       migrating with bar\n")
	done := strings.Index(push, "-----> Release phase done")
	started := strings.Index(push, "Starting web.0 of release 1")
	if phase < 0 || ran < phase || done < ran || started < done || !strings.Contains(push, "       to stderr\n") {
		t.Errorf("the push output does not show the release phase, with its output, before web.0 starts:\n%s", push)
	}
	if _, log := e.buildLog(t, tenantID); !strings.Contains(log, "migrating with bar") {
		t.Errorf("the build log lacks the release phase's output:\n%s", log)
	}
	v1, err := e.body()
	if err != nil || v1 != "v1" {
		t.Fatalf("after v1's push the app answers %q, %v", v1, err)
	}
	if got := e.app(t).Status.LatestBuild; got != 1 {
		t.Errorf("after build 1 went out the App's status.latestBuild is %d", got)
	}
	if st, err := e.rt.Status(ctx, e.tenant, e.name); err != nil || len(st.Instances) != 1 {
		t.Errorf("the runtime runs %+v, %v: the release process must not run as an instance", st.Instances, err)
	}

	t.Run("a release phase that fails keeps the previous release", func(t *testing.T) {
		var out platformtest.SyncBuffer
		_, err := e.a.Deploy(ctx, e.commitWithRelease(t, "v2", `echo "migration 2 of 2"; echo "relation users already exists" >&2; exit 3`), &out)
		if err == nil {
			t.Fatalf("a push whose release phase exits 3 went out:\n%s", out.String())
		}
		t.Logf("the push failed: %v", err)
		// The git receiver prints the error after the output.
		for _, want := range []string{"exited with status 3", "relation users already exists"} {
			if !strings.Contains(err.Error(), want) || !strings.Contains(out.String(), want) {
				t.Errorf("the push's error and output do not say %q:\n%v\n%s", want, err, out.String())
			}
		}
		if !strings.Contains(err.Error(), "the previous release keeps serving") {
			t.Errorf("the push's error does not say the previous release keeps serving: %v", err)
		}
		if strings.Contains(out.String(), "Starting web.0 of release 2") {
			t.Errorf("release 2's instances started after its release phase failed:\n%s", out.String())
		}
		if body, err := e.body(); err != nil || body != "v1" || e.serving(t) != 1 {
			t.Errorf("after the failed release phase the app answers %q, %v, runtime serves v%d; want v1", body, err, e.serving(t))
		}
		if latest, err := e.st.LatestRelease(ctx, tenantID, e.name); err != nil || latest.Number != 1 || e.app(t).Status.CurrentRelease != 1 {
			t.Errorf("after the failed release phase the latest release is v%d (%v); want v1", latest.Number, err)
		}
		b, log := e.buildLog(t, tenantID)
		// The release is listed, failed with the reason the push printed.
		list, err := e.st.ListReleases(ctx, tenantID, e.name, store.ReleaseFilter{})
		if err != nil || len(list) != 2 {
			t.Fatalf("after the failed release phase the releases are %+v, %v; want failed v2 and v1", list, err)
		}
		v2 := list[0]
		if v2.Number != 2 || v2.Status != store.ReleaseFailed || v2.Kind != store.ReleaseKindDeploy || v2.BuildID != b.ID ||
			!strings.Contains(v2.Failure, "exited with status 3") || !strings.Contains(v2.Failure, "relation users already exists") ||
			!strings.Contains(out.String(), v2.Failure) || list[1].Status != store.ReleaseSucceeded {
			t.Errorf("failed v2 = %+v; want a failed deploy of build %d saying what the push said", v2, b.Number)
		}
		if strings.Contains(v2.Failure, "s3cret") {
			t.Errorf("the failed release's reason shows a secret's value: %q", v2.Failure)
		}
		if !strings.Contains(out.String(), "v2 is recorded as failed") {
			t.Errorf("the push output does not name failed release v2:\n%s", out.String())
		}
		if b.Status != store.BuildFailed || !strings.Contains(b.Error, "exited with status 3") || !strings.Contains(log, "relation users already exists") {
			t.Errorf("the build record: %s %q; log:\n%s", b.Status, b.Error, log)
		}
		// The App controller learns of the failed build from the App.
		if got := e.app(t).Status.LatestBuild; got != int64(b.Number) {
			t.Errorf("after failed build %d the App's status.latestBuild is %d", b.Number, got)
		}
	})

	t.Run("a release phase past its time limit keeps the previous release", func(t *testing.T) {
		pl := e.releaserWith(func(o *release.Options) { o.ReleasePhaseTimeout = 2 * time.Second })
		var out platformtest.SyncBuffer
		_, err := pl.Deploy(ctx, e.commitWithRelease(t, "v3", "echo waiting for a lock; exec sleep 600"), &out)
		if err == nil || !strings.Contains(err.Error(), "timed out after 2s") || !strings.Contains(err.Error(), "waiting for a lock") {
			t.Fatalf("a push whose release phase outlasts its limit: %v, want it stopped saying so\n%s", err, out.String())
		}
		if body, err := e.body(); err != nil || body != "v1" {
			t.Errorf("after the timed-out release phase the app answers %q, %v; want v1", body, err)
		}
		// Failed v2's number was taken: this one is failed v3.
		v3, err := e.st.GetRelease(ctx, tenantID, e.name, 0)
		if err != nil || v3.Number != 3 || v3.Status != store.ReleaseFailed || !strings.Contains(v3.Failure, "timed out after 2s") {
			t.Errorf("after the timed-out release phase the newest release is %+v, %v; want failed v3", v3, err)
		}
		if cur, err := e.st.CurrentRelease(ctx, tenantID, e.name, 0); err != nil || cur.Number != 1 || e.app(t).Status.CurrentRelease != 1 {
			t.Errorf("after two failed releases the current one is v%d, %v; want v1", cur.Number, err)
		}
	})

	t.Run("a one-off run of the current release", func(t *testing.T) {
		var stdout, stderr platformtest.SyncBuffer
		exit, err := e.a.Run(ctx, e.tenant, e.name, runtime.Command{
			Args: []string{"sh", "-c", `echo "$FOO $API_KEY ${PORT:-no port}"; ls server.js; echo err >&2; exit 7`}, Name: "run.1",
			Attach: func(int) (runtime.Streams, error) { return runtime.Streams{Stdout: &stdout, Stderr: &stderr}, nil },
		})
		if err != nil || exit.Code != 7 || stdout.String() != "bar s3cret no port\nserver.js\n" || stderr.String() != "err\n" {
			t.Errorf("a run: exit %+v, %v, stdout %q, stderr %q", exit, err, stdout.String(), stderr.String())
		}
		if st, err := e.rt.Status(ctx, e.tenant, e.name); err != nil || len(st.Instances) != 1 || st.Release != 1 {
			t.Errorf("after the run the runtime runs %+v, %v; want v1's one instance", st, err)
		}
	})
}

// TestRunWithoutRelease: an app with no release yet has nothing to run a
// command in: the error is a conflict that says to push, and nothing runs.
func TestRunWithoutRelease(t *testing.T) {
	e := newEnv(t)
	attached := false
	_, err := e.a.Run(t.Context(), e.tenant, e.name, runtime.Command{
		Args: []string{"true"}, Name: "run.1",
		Attach: func(int) (runtime.Streams, error) { attached = true; return runtime.Streams{}, nil },
	})
	if !errors.Is(err, store.ErrConflict) || !strings.Contains(err.Error(), "push to its git remote first") || attached {
		t.Errorf("a run of an app without a release: %v (attached %v)", err, attached)
	}
}
