package dashboard

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"bex.co/bex/web/api/apiclient"
)

// TestAppRuns: the app page lists the newest runs and says when there are
// older ones; an older run that runs still is listed after them, so that
// it keeps its Stop button; a run in both lists is listed once.
func TestAppRuns(t *testing.T) {
	at := time.Date(2026, 12, 5, 2, 0, 0, 0, time.UTC)
	run := func(n int, status string) apiclient.Run {
		return apiclient.Run{Number: n, Status: status, Command: []string{"true"}, StartedAt: at.Add(time.Duration(n) * time.Minute)}
	}
	numbers := func(v appRunsView) string {
		var b strings.Builder
		for _, r := range v.Rows {
			fmt.Fprintf(&b, "%d/%s ", r.Number, r.Status)
		}
		return fmt.Sprintf("%s more=%t", strings.TrimSpace(b.String()), v.More)
	}
	stopAt := at.Add(time.Hour)
	for _, tc := range []struct {
		name    string
		newest  []apiclient.Run
		running []apiclient.RunningRun
		want    string
	}{
		{name: "none", want: " more=false"},
		{name: "fewer than the bound", newest: []apiclient.Run{run(2, "running"), run(1, "succeeded")},
			running: []apiclient.RunningRun{{Number: 2}}, want: "2/running 1/succeeded more=false"},
		{name: "past the bound", newest: []apiclient.Run{run(5, "failed"), run(4, "succeeded"), run(3, "lost"), run(2, "failed")},
			want: "5/failed 4/succeeded 3/lost more=true"},
		{name: "older runs that run", newest: []apiclient.Run{run(9, "failed"), run(8, "running"), run(7, "succeeded"), run(6, "failed")},
			running: []apiclient.RunningRun{{Number: 1, Since: at}, {Number: 4, StopRequestedAt: &stopAt, StopRequestedBy: "ann@acme.test"}, {Number: 8}},
			want:    "9/failed 8/running 7/succeeded 4/running 1/running more=true"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := appRuns(tc.newest, tc.running, 3)
			if got := numbers(v); got != tc.want {
				t.Errorf("rows %q, want %q", got, tc.want)
			}
		})
	}
	v := appRuns(nil, []apiclient.RunningRun{{Number: 4, Release: 3, Command: []string{"rake"}, CreatedBy: "ann@acme.test", Detached: true, Since: at, StopRequestedAt: &stopAt, StopRequestedBy: "bob@acme.test"}}, 3)
	if r := v.Rows[0]; r.Release != 3 || r.CreatedBy != "ann@acme.test" || !r.Detached || !r.StartedAt.Equal(at) || r.StopRequestedBy != "bob@acme.test" || r.Summary() != "stopping (asked by bob@acme.test)" {
		t.Errorf("an older run that runs is listed as %+v", r)
	}
}

// TestRunState: a run's status reads as bex runs' STATUS, its head in a
// badge coloured by how it stands.
func TestRunState(t *testing.T) {
	code := func(c int) *int { return &c }
	at := time.Date(2026, 12, 5, 2, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		run  apiclient.Run
		want runState
	}{
		{apiclient.Run{Status: "running"}, runState{"ready", "running", ""}},
		{apiclient.Run{Status: "running", StopRequestedAt: &at, StopRequestedBy: "ann@acme.test"}, runState{"pending", "stopping", " (asked by ann@acme.test)"}},
		{apiclient.Run{Status: "succeeded", ExitCode: code(0)}, runState{"ready", "exit 0", ""}},
		{apiclient.Run{Status: "failed", ExitCode: code(143), Reason: "stopped by ann@acme.test"}, runState{"failed", "exit 143", ": stopped by ann@acme.test"}},
		{apiclient.Run{Status: "failed", ExitCode: code(3)}, runState{"failed", "exit 3", ""}},
		{apiclient.Run{Status: "lost", Reason: "the API server running it stopped answering"}, runState{"failed", "lost", ": the API server running it stopped answering"}},
		{apiclient.Run{Status: "failed", Reason: "no release"}, runState{"failed", "not started", ": no release"}},
	} {
		if got := runStateOf(tc.run); got != tc.want {
			t.Errorf("%+v: %+v, want %+v", tc.run, got, tc.want)
		}
		if got := runStateOf(tc.run); got.Head+got.Tail != tc.run.Summary() {
			t.Errorf("%+v reads %q, bex runs %q", tc.run, got.Head+got.Tail, tc.run.Summary())
		}
	}
}
