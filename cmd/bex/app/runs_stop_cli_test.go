package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"bex.co/bex/cmd/bex/app"
	"bex.co/bex/internal/controlplane/cptest"
	"bex.co/bex/internal/store"
	"bex.co/bex/test/platformtest"
	"bex.co/bex/web/api/apiclient"
	"bex.co/bex/web/api/apitest"
)

// TestRunsStopCLI: bex runs stop ends a detached run (bex runs then says
// it was stopped and by whom) and an attached one (whose bex run exits 143
// saying so), prints the run with -o json, lists a run asked to stop as
// stopping, and exits with its kind's code for a run that has ended (4),
// an unknown one (3) and a run it cannot read (2).
func TestRunsStopCLI(t *testing.T) {
	e := apitest.StartWith(t, cptest.Start(t), apitest.Options{RuntimeLogs: true})
	tenant, token := e.TenantToken(t, "clistop")
	env := map[string]string{"BEX_API": e.URL, "BEX_TOKEN": token}
	if _, stderr, code := bexRunWith(t, env, "", "apps", "create", "shop"); code != 0 {
		t.Fatal(stderr)
	}
	e.SetCurrentRelease(t, "clistop", "shop", 2)

	if _, stderr, code := bexRunWith(t, env, "", "run", "-d", "shop", "--", "sleep", "600"); code != 0 {
		t.Fatal(stderr)
	}
	stdout, stderr, code := bexRunWith(t, env, "", "runs", "stop", "shop", "run.1")
	if want := "Stopping run.1 of shop (sleep 600): bex runs shop shows when it has ended.\n"; code != 0 || stdout != want || stderr != "" {
		t.Errorf("bex runs stop shop run.1: exit %d, stdout %q, stderr %q; want 0, %q", code, stdout, stderr, want)
	}
	platformtest.Eventually(t, time.Minute, "run.1 to end", func(context.Context) error {
		stdout, _, _ := bexRunWith(t, env, "", "runs", "shop")
		if !regexp.MustCompile(`(?m)^run\.1 +sleep 600 +v2 .* exit 143: stopped by token:test$`).MatchString(stdout) {
			return fmt.Errorf("bex runs:\n%s", stdout)
		}
		return nil
	})

	// Attached: bex run ends as at its time limit, saying who stopped it.
	type result struct {
		stderr string
		code   int
	}
	attached := make(chan result, 1)
	go func() {
		_, stderr, code := bexRunWith(t, env, "", "run", "shop", "--", "sleep", "600")
		attached <- result{stderr, code}
	}()
	platformtest.Eventually(t, time.Minute, "run.2 to run", func(context.Context) error {
		stdout, _, _ := bexRunWith(t, env, "", "runs", "shop")
		if !regexp.MustCompile(`(?m)^run\.2 .* running$`).MatchString(stdout) {
			return fmt.Errorf("bex runs:\n%s", stdout)
		}
		return nil
	})
	stdout, stderr, code = bexRunWith(t, env, "", "runs", "stop", "shop", "2", "-o", "json")
	var r apiclient.Run
	if err := json.Unmarshal([]byte(stdout), &r); err != nil || code != 0 || r.Number != 2 || r.StopRequestedBy != "token:test" || r.StopRequestedAt == nil {
		t.Errorf("bex runs stop -o json: exit %d, %v, stdout %q, stderr %q", code, err, stdout, stderr)
	}
	if got := <-attached; got.code != 143 || got.stderr != "bex: run.2 of shop: stopped by token:test (exit status 143)\n" {
		t.Errorf("bex run stopped: exit %d, stderr %q; want 143 saying who stopped it", got.code, got.stderr)
	}

	// A run asked to stop that has not ended yet is listed as stopping:
	// this one's row has no server running it.
	held, err := e.Store.CreateRun(t.Context(), store.NewRun{TenantID: tenant.ID, App: "shop", Release: 2, Command: []string{"sleep", "600"}, CreatedBy: "a@clistop.test"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Store.RequestRunStop(t.Context(), tenant.ID, "shop", held.Number, "b@clistop.test"); err != nil {
		t.Fatal(err)
	}
	if stdout, _, _ := bexRunWith(t, env, "", "runs", "shop"); !regexp.MustCompile(`(?m)^run\.3 +sleep 600 .* stopping \(asked by b@clistop\.test\)$`).MatchString(stdout) {
		t.Errorf("bex runs with run.3 asked to stop:\n%s", stdout)
	}

	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"a run that has ended", []string{"runs", "stop", "shop", "run.1"}, app.ExitConflict, "run.1 of shop has ended already (exit status 143, stopped by token:test): there is nothing to stop"},
		{"an unknown run", []string{"runs", "stop", "shop", "run.99"}, app.ExitNotFound, `app "shop" has no run.99`},
		{"an unknown app", []string{"runs", "stop", "nothing", "1"}, app.ExitNotFound, `app "nothing" not found`},
		{"not a run", []string{"runs", "stop", "shop", "web.1"}, app.ExitUsage, `run "web.1": give a run as bex runs lists it, such as run.3`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr, code := bexRunWith(t, env, "", tc.args...)
			if code != tc.code || stdout != "" || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, stdout %q, stderr %q; want %d saying %q", code, stdout, stderr, tc.code, tc.want)
			}
			stdout, stderr, code = bexRunWith(t, env, "", append(tc.args, "-o", "json")...)
			var body struct{ Error app.Error }
			if err := json.Unmarshal([]byte(stderr), &body); err != nil || code != tc.code || stdout != "" || !strings.Contains(body.Error.Message, tc.want) {
				t.Errorf("with -o json: exit %d, stdout %q, stderr %q (%v)", code, stdout, stderr, err)
			}
		})
	}
}

// TestRunsLostCLI: a run whose API server stopped answering is listed by
// bex runs as lost, saying why (-o json: status lost, the reason, no exit
// status), and bex runs stop of it exits 4 saying it was lost.
func TestRunsLostCLI(t *testing.T) {
	e := apitest.StartWith(t, cptest.Start(t), apitest.Options{RunHeartbeat: 100 * time.Millisecond, RunLostAfter: time.Second})
	tenant, token := e.TenantToken(t, "clilost")
	env := map[string]string{"BEX_API": e.URL, "BEX_TOKEN": token}
	if _, stderr, code := bexRunWith(t, env, "", "apps", "create", "shop"); code != 0 {
		t.Fatal(stderr)
	}
	// Recorded by a server that never says it is alive again, as one
	// that died just after.
	if _, err := e.Store.CreateRun(t.Context(), store.NewRun{TenantID: tenant.ID, App: "shop", Release: 2, Command: []string{"sleep", "600"}, CreatedBy: "a@clilost.test", ServerID: uuid.NewString()}); err != nil {
		t.Fatal(err)
	}
	platformtest.Eventually(t, time.Minute, "run.1 to be lost", func(context.Context) error {
		stdout, _, _ := bexRunWith(t, env, "", "runs", "shop")
		if !regexp.MustCompile(`(?m)^run\.1 +sleep 600 +v2 +a@clilost\.test .* lost: the API server running it stopped answering$`).MatchString(stdout) {
			return fmt.Errorf("bex runs:\n%s", stdout)
		}
		return nil
	})
	stdout, stderr, code := bexRunWith(t, env, "", "runs", "shop", "-o", "json")
	var runs []apiclient.Run
	if err := json.Unmarshal([]byte(stdout), &runs); err != nil || code != 0 || len(runs) != 1 || runs[0].Status != "lost" ||
		runs[0].Reason != store.LostRunReason || runs[0].ExitCode != nil || runs[0].FinishedAt == nil {
		t.Errorf("bex runs -o json: exit %d, %v, stdout %q, stderr %q", code, err, stdout, stderr)
	}
	stdout, stderr, code = bexRunWith(t, env, "", "runs", "stop", "shop", "run.1")
	if want := "run.1 of shop has ended already (lost, the API server running it stopped answering): there is nothing to stop"; code != app.ExitConflict || stdout != "" || !strings.Contains(stderr, want) {
		t.Errorf("bex runs stop of a lost run: exit %d, stdout %q, stderr %q; want %d saying %q", code, stdout, stderr, app.ExitConflict, want)
	}
}
