package app

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"bex.co/bex/web/api/apiclient"
)

// TestRenderInstances: bex ps says where the app runs and how, then a row
// per instance with its state, how long ago it entered it, its release
// and restarts; an app that runs nothing says why; one-off runs that run
// come after, in a group of their own, also when the instances could not
// be read, which the first line then says.
func TestRenderInstances(t *testing.T) {
	now := time.Date(2026, 5, 6, 12, 0, 0, 0, time.UTC)
	is := apiclient.Instances{App: "shop", Release: 4, Cluster: "alpha", Message: "release 4: worker.0 crashed 3 times; restarting in 2s; last exit: exit status 1",
		Instances: []apiclient.Instance{
			{Name: "web.0", Process: "web", Release: 4, State: "up", Since: now.Add(-(3*time.Hour + 12*time.Minute + 5*time.Second))},
			{Name: "web.1", Process: "web", Release: 4, State: "up", Since: now.Add(-(50*time.Hour + 10*time.Minute))},
			{Name: "worker.0", Process: "worker", Release: 4, State: "crashed", Restarts: 3, Since: now.Add(-12 * time.Second)},
			{Name: "worker.0", Process: "worker", Release: 5, State: "starting", Since: now.Add(-(4*time.Minute + 59*time.Second))},
		}}
	for _, tc := range []struct {
		name   string
		change func(*apiclient.Instances)
		want   string
	}{{
		name:   "on a cluster of the fleet",
		change: func(*apiclient.Instances) {},
		want: "shop on alpha: release 4: worker.0 crashed 3 times; restarting in 2s; last exit: exit status 1\n" +
			"INSTANCE  STATE     SINCE      RELEASE  RESTARTS\n" +
			"web.0     up        3h12m ago  v4       0\n" +
			"web.1     up        2d2h ago   v4       0\n" +
			"worker.0  crashed   12s ago    v4       3\n" +
			"worker.0  starting  4m ago     v5       0\n",
	}, {
		name: "nothing runs",
		change: func(is *apiclient.Instances) {
			is.Cluster, is.Release, is.Instances, is.Message = "", 0, nil, "shop has no release yet: push to its git remote"
		},
		want: "No instances of shop: shop has no release yet: push to its git remote\n",
	}, {
		name: "with one-off runs",
		change: func(is *apiclient.Instances) {
			is.Instances = is.Instances[:1]
			is.Runs = []apiclient.RunningRun{
				{Name: "run.3", Number: 3, Release: 4, Command: []string{"rake", "db:migrate"}, CreatedBy: "a@b.c", State: "up", Since: now.Add(-61 * time.Second)},
				{Name: "run.5", Number: 5, Release: 4, Command: []string{"sh", "-c", "sleep 600"}, CreatedBy: "token:ci", Detached: true, State: "stopping",
					StopRequestedBy: "x@b.c", Since: now.Add(-5 * time.Second)},
			}
		},
		want: "shop on alpha: release 4: worker.0 crashed 3 times; restarting in 2s; last exit: exit status 1\n" +
			"INSTANCE  STATE  SINCE      RELEASE  RESTARTS\n" +
			"web.0     up     3h12m ago  v4       0\n" +
			"\n" +
			"One-off runs of shop (2):\n" +
			"RUN    STATE                      SINCE   RELEASE  BY        HOW       COMMAND\n" +
			"run.3  up                         1m ago  v4       a@b.c     attached  rake db:migrate\n" +
			"run.5  stopping (asked by x@b.c)  5s ago  v4       token:ci  detached  sh -c 'sleep 600'\n",
	}, {
		name: "one-off runs alone",
		change: func(is *apiclient.Instances) {
			is.Cluster, is.Release, is.Instances, is.Message = "", 0, nil, "no instance of shop runs"
			is.Runs = []apiclient.RunningRun{{Name: "run.1", Number: 1, Release: 4, Command: []string{"bash"}, CreatedBy: "a@b.c", State: "up", Since: now}}
		},
		want: "No instances of shop: no instance of shop runs\n" +
			"\n" +
			"One-off runs of shop (1):\n" +
			"RUN    STATE  SINCE   RELEASE  BY     HOW       COMMAND\n" +
			"run.1  up     0s ago  v4       a@b.c  attached  bash\n",
	}, {
		name: "instances not read",
		change: func(is *apiclient.Instances) {
			is.Cluster, is.Release, is.Instances = "", 0, nil
			is.InstancesError = `the runtime that runs app "shop" does not answer now: try again in a moment`
			is.Message = "the instances could not be read: " + is.InstancesError
			is.Runs = []apiclient.RunningRun{{Name: "run.1", Number: 1, Release: 4, Command: []string{"bash"}, CreatedBy: "a@b.c", State: "up", Since: now}}
		},
		want: "shop: the instances could not be read: the runtime that runs app \"shop\" does not answer now: try again in a moment\n" +
			"\n" +
			"One-off runs of shop (1):\n" +
			"RUN    STATE  SINCE   RELEASE  BY     HOW       COMMAND\n" +
			"run.1  up     0s ago  v4       a@b.c  attached  bash\n",
	}} {
		in := is
		tc.change(&in)
		var out bytes.Buffer
		st := &state{io: IO{Out: &out}}
		if err := st.renderInstances(&out, in, now); err != nil {
			t.Fatal(err)
		}
		if out.String() != tc.want {
			t.Errorf("%s: got\n%s\nwant\n%s", tc.name, out.String(), tc.want)
		}
	}
}

// TestRenderReleaseInfo: bex releases info writes a release as labelled
// lines: its status, build and commit, its variables by name and what it
// changed in words.
func TestRenderReleaseInfo(t *testing.T) {
	at := time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC)
	r := apiclient.ReleaseInfo{
		Release: apiclient.Release{Number: 3, Kind: apiclient.ReleaseKindConfig, Description: "Set FOO; unset BAR", Image: "r/acme/shop@sha256:2", Build: 2, Current: true, Status: "current", CreatedBy: "dev@acme.test", CreatedAt: at},
		Commit:  "def5678eeee", Stack: "go",
		Env:     []apiclient.ReleaseEnvVar{{Name: "API_KEY", Secret: true}, {Name: "FOO"}},
		Changes: apiclient.ReleaseChanges{Previous: 2, Added: []string{}, Changed: []string{"FOO"}, Removed: []string{"BAR"}},
	}
	var out bytes.Buffer
	if err := renderReleaseInfo(&out, r); err != nil {
		t.Fatal(err)
	}
	want := "Release:     v3 (current)\n" +
		"Kind:        config\n" +
		"Description: Set FOO; unset BAR\n" +
		"By:          dev@acme.test\n" +
		"Created:     2026-05-06 07:08\n" +
		"Build:       2 (commit def5678, go)\n" +
		"Image:       r/acme/shop@sha256:2\n" +
		"Env:         API_KEY (secret), FOO\n" +
		"Changes:     from v2: changed FOO; removed BAR\n"
	if out.String() != want {
		t.Errorf("got\n%s\nwant\n%s", out.String(), want)
	}
	// A rollback says to what; a server that does not say the kind, "-".
	for _, tc := range []struct {
		kind string
		to   int
		want string
	}{{apiclient.ReleaseKindRollback, 1, "Kind:        rollback to v1\n"}, {"", 0, "Kind:        -\n"}} {
		r.Kind, r.RollbackTo = tc.kind, tc.to
		out.Reset()
		if err := renderReleaseInfo(&out, r); err != nil || !strings.Contains(out.String(), tc.want) {
			t.Errorf("kind %q to v%d: got\n%s\nwant a line %q (%v)", tc.kind, tc.to, out.String(), tc.want, err)
		}
	}
	for _, tc := range []struct {
		changes apiclient.ReleaseChanges
		want    string
	}{
		{apiclient.ReleaseChanges{Previous: 0, Image: true, Added: []string{"A", "B"}}, "first release: added A, B"},
		{apiclient.ReleaseChanges{Previous: 4, Image: true}, "from v4: new image"},
		{apiclient.ReleaseChanges{Previous: 4}, "from v4: nothing"},
	} {
		if got := releaseChangesInWords(tc.changes); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.changes, got, tc.want)
		}
	}
}

// TestRenderFailedRelease: a failed release says so in its first line and
// why on a Failure line, the last lines of a release phase indented under
// it; a pruned failed release is failed, not pruned.
func TestRenderFailedRelease(t *testing.T) {
	at := time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC)
	r := apiclient.ReleaseInfo{
		Release: apiclient.Release{Number: 7, Kind: apiclient.ReleaseKindDeploy, Description: "Deploy abc1234", Image: "r/acme/shop@sha256:7",
			Status: apiclient.ReleaseFailed, Failure: "the release phase (./migrate) exited with status 3; its last lines:\n  one\n  two",
			PrunedAt: &at, CreatedBy: "git", CreatedAt: at},
		Env:     []apiclient.ReleaseEnvVar{},
		Changes: apiclient.ReleaseChanges{Previous: 6, Image: true},
	}
	var out bytes.Buffer
	if err := renderReleaseInfo(&out, r); err != nil {
		t.Fatal(err)
	}
	want := "Release:     v7 (failed)\n" +
		"Kind:        deploy\n" +
		"Description: Deploy abc1234\n" +
		"Failure:     the release phase (./migrate) exited with status 3; its last lines:\n" +
		"               one\n" +
		"               two\n" +
		"By:          git\n" +
		"Created:     2026-05-06 07:08\n" +
		"Build:       -\n" +
		"Image:       r/acme/shop@sha256:7\n" +
		"Env:         -\n" +
		"Changes:     from v6: new image\n"
	if out.String() != want {
		t.Errorf("got\n%s\nwant\n%s", out.String(), want)
	}
}
