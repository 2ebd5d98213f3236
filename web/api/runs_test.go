package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"k8s.io/utils/ptr"

	"bex.co/bex/internal/controlplane/cptest"
	"bex.co/bex/internal/store"
	"bex.co/bex/test/platformtest"
	"bex.co/bex/web/api"
	"bex.co/bex/web/api/apiclient"
	"bex.co/bex/web/api/apitest"
)

// runOf runs command through the client and returns how it ended and what
// it wrote.
func runOf(t *testing.T, c *apiclient.Client, app string, req apiclient.RunRequest, stdin io.Reader) (apiclient.RunExit, string, string, error) {
	t.Helper()
	var stdout, stderr platformtest.SyncBuffer
	exit, err := c.Run(t.Context(), app, req, apiclient.RunStreams{Stdin: stdin, Stdout: &stdout, Stderr: &stderr})
	return exit, stdout.String(), stderr.String(), err
}

// listRuns lists the app's runs through the API.
func listRuns(t *testing.T, c *apiclient.Client, app string) []apiclient.Run {
	t.Helper()
	runs, err := c.ListRuns(t.Context(), app, 0)
	if err != nil {
		t.Fatal(err)
	}
	return runs
}

// TestRuns: POST .../runs streams a command's stdout and stderr as it
// runs, forwards stdin, and ends with its exit status; the command is
// killed when the client goes away and stopped at its time limit; each
// run is recorded (GET .../runs) and audited; a run past the tenant's
// concurrentRuns quota gets a 403 naming it, an app without a release a
// 409, bad input a 422, a request without the upgrade a 426, an app on a
// runtime that runs no commands a 501, and none of them changes anything.
func TestRuns(t *testing.T) {
	e := apitest.Start(t, cptest.Start(t))
	ctx := t.Context()
	tenant, token := e.TenantToken(t, "runs")
	createApp(t, e, token, "web")
	c, err := apiclient.New(e.URL, token, nil)
	if err != nil {
		t.Fatal(err)
	}
	echo := apiclient.RunRequest{Command: []string{"echo", "hello"}}

	t.Run("refused without changing anything", func(t *testing.T) {
		runsBefore, auditBefore := countRows(t, e, "runs"), countRows(t, e, "audit_log")
		if _, _, _, err := runOf(t, c, "web", echo, nil); !apiclient.IsStatus(err, http.StatusConflict) || !strings.Contains(err.Error(), "push to its git remote first") {
			t.Errorf("a run in an app without a release: %v, want 409", err)
		}
		if _, err := c.RunDetached(ctx, "web", echo); !apiclient.IsStatus(err, http.StatusConflict) {
			t.Errorf("a detached run in an app without a release: %v, want 409", err)
		}
		e.SetCurrentRelease(t, "runs", "web", 3)
		for _, tc := range []struct {
			name   string
			req    apiclient.RunRequest
			status int
			field  string
			want   string
		}{
			{"no command", apiclient.RunRequest{}, 422, "command", "give the command to run"},
			{"a NUL byte", apiclient.RunRequest{Command: []string{"echo", "a\x00b"}}, 422, "command", "argument 1 holds a NUL byte"},
			{"too many arguments", apiclient.RunRequest{Command: make([]string, 257)}, 422, "command", ""},
			{"too long", apiclient.RunRequest{Command: []string{"echo", strings.Repeat("x", 17<<10)}}, 422, "command", "a command line is at most 16384"},
			{"too long a time", apiclient.RunRequest{Command: echo.Command, TimeoutSeconds: 86401}, 422, "timeoutSeconds", "at most 86400 seconds"},
			{"a huge terminal", apiclient.RunRequest{Command: echo.Command, Terminal: true, Cols: 5000, Rows: 40}, 422, "cols", "at most 1000"},
			{"detached with stdin", apiclient.RunRequest{Command: []string{"cat"}, Stdin: true, Detach: true}, 422, "detach", "reads no input"},
			{"detached on a terminal", apiclient.RunRequest{Command: []string{"sh"}, Terminal: true, Detach: true}, 422, "detach", "has no terminal"},
			{"detached without a command", apiclient.RunRequest{Detach: true}, 422, "command", "give the command to run"},
		} {
			var err error
			if tc.req.Detach {
				_, err = c.RunDetached(ctx, "web", tc.req)
			} else {
				_, _, _, err = runOf(t, c, "web", tc.req, nil)
			}
			var ae *apiclient.Error
			if !errors.As(err, &ae) || ae.Status != tc.status || ae.Field != tc.field || !strings.Contains(ae.Message, tc.want) {
				t.Errorf("%s: %v, want %d on %q saying %q", tc.name, err, tc.status, tc.field, tc.want)
			}
		}
		if _, err := c.RunDetached(ctx, "nothing", echo); !apiclient.IsStatus(err, http.StatusNotFound) {
			t.Errorf("a detached run in an app that does not exist: %v, want 404", err)
		}
		if _, _, _, err := runOf(t, c, "nothing", echo, nil); !apiclient.IsStatus(err, http.StatusNotFound) {
			t.Errorf("a run in an app that does not exist: %v, want 404", err)
		}
		// Another tenant's app is no app of this one.
		_, otherToken := e.TenantToken(t, "runs-other")
		other, _ := apiclient.New(e.URL, otherToken, nil)
		if _, _, _, err := runOf(t, other, "web", echo, nil); !apiclient.IsStatus(err, http.StatusNotFound) {
			t.Errorf("a run in another tenant's app: %v, want 404", err)
		}
		a := call(t, e, http.MethodPost, "/apps/web/runs", token, echo)
		if a.status != http.StatusUpgradeRequired || a.header.Get("Upgrade") != apiclient.RunProtocol || !strings.Contains(a.err().Message, "Upgrade: bex-run.v1") {
			t.Errorf("a run without the upgrade: %d %s %v, want 426 naming the protocol", a.status, a.body, a.header)
		}
		e.Releaser.SetRunsUnsupported(true)
		_, _, _, err := runOf(t, c, "web", echo, nil)
		_, detachedErr := c.RunDetached(ctx, "web", echo)
		e.Releaser.SetRunsUnsupported(false)
		if !apiclient.IsStatus(err, http.StatusNotImplemented) || !strings.Contains(err.Error(), "one-off commands do not run") {
			t.Errorf("a run on a runtime that runs no commands: %v, want 501", err)
		}
		if !apiclient.IsStatus(detachedErr, http.StatusNotImplemented) {
			t.Errorf("a detached run on a runtime that runs no commands: %v, want 501", detachedErr)
		}
		// An app on a workload cluster: its runs take no input.
		e.Releaser.SetRunsTakeNoInput(true)
		for name, req := range map[string]apiclient.RunRequest{
			"stdin":      {Command: []string{"cat"}, Stdin: true},
			"a terminal": {Command: []string{"sh"}, Terminal: true, Cols: 80, Rows: 24},
		} {
			_, _, _, err := runOf(t, c, "web", req, nil)
			var ae *apiclient.Error
			if !errors.As(err, &ae) || ae.Status != http.StatusUnprocessableEntity || ae.Field != "stdin" || !strings.Contains(ae.Message, "--no-tty") {
				t.Errorf("%s on a runtime that takes no input: %v, want 422 on stdin saying what to do", name, err)
			}
		}
		e.Releaser.SetRunsTakeNoInput(false)
		if runs, audit := countRows(t, e, "runs"), countRows(t, e, "audit_log"); runs != runsBefore || audit != auditBefore {
			t.Errorf("refused runs recorded %d runs and %d audit entries", runs-runsBefore, audit-auditBefore)
		}
	})

	t.Run("output and exit status", func(t *testing.T) {
		exit, stdout, stderr, err := runOf(t, c, "web", apiclient.RunRequest{Command: []string{"sh", "-c", "echo out; echo err >&2; exit 7"}}, nil)
		if err != nil || exit.ExitCode != 7 || exit.Reason != "" || exit.Release != 3 || stdout != "out\n" || stderr != "err\n" {
			t.Errorf("exit %+v, %v, stdout %q, stderr %q; want 7 in v3, out, err", exit, err, stdout, stderr)
		}
		// A stream longer than one frame comes whole.
		exit, stdout, _, err = runOf(t, c, "web", apiclient.RunRequest{Command: []string{"sh", "-c", "head -c 100000 /dev/zero | tr '\\0' x"}}, nil)
		if err != nil || exit.ExitCode != 0 || stdout != strings.Repeat("x", 100000) {
			t.Errorf("100000 bytes of output: exit %+v, %v, got %d bytes", exit, err, len(stdout))
		}
	})

	t.Run("stdin", func(t *testing.T) {
		exit, stdout, _, err := runOf(t, c, "web", apiclient.RunRequest{Command: []string{"sh", "-c", `read a; read b; echo "got $a and $b"; cat`}},
			strings.NewReader("one\ntwo\nthe rest\n"))
		if err != nil || exit.ExitCode != 0 || stdout != "got one and two\nthe rest\n" {
			t.Errorf("stdin forwarded: exit %+v, %v, stdout %q", exit, err, stdout)
		}
		exit, stdout, _, err = runOf(t, c, "web", apiclient.RunRequest{Command: []string{"cat"}}, nil)
		if err != nil || exit.ExitCode != 0 || stdout != "" {
			t.Errorf("no stdin: cat ended with %+v, %v, %q; want at once, empty", exit, err, stdout)
		}
	})

	t.Run("the client going away kills the command", func(t *testing.T) {
		runCtx, cancel := context.WithCancel(ctx)
		defer cancel()
		var stdout platformtest.SyncBuffer
		done := make(chan error, 1)
		go func() {
			_, err := c.Run(runCtx, "web", apiclient.RunRequest{Command: []string{"sh", "-c", "echo $$; exec sleep 600"}}, apiclient.RunStreams{Stdout: &stdout})
			done <- err
		}()
		var pid int
		platformtest.Eventually(t, time.Minute, "the command to say its process id", func(context.Context) error {
			var err error
			pid, err = strconv.Atoi(strings.TrimSpace(stdout.String()))
			return err
		})
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Run after its context ended: %v", err)
		}
		platformtest.Eventually(t, time.Minute, "the command to be killed", func(context.Context) error {
			if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
				return fmt.Errorf("process %d is still there (%v)", pid, err)
			}
			return nil
		})
		platformtest.Eventually(t, time.Minute, "the run to be recorded as ended", func(context.Context) error {
			r := listRuns(t, c, "web")[0]
			if r.Status != string(store.RunFailed) || r.Reason != "the client went away" || r.ExitCode == nil {
				return fmt.Errorf("run.%d is %s (%q)", r.Number, r.Status, r.Reason)
			}
			return nil
		})
	})

	t.Run("stopped at its time limit", func(t *testing.T) {
		exit, _, _, err := runOf(t, c, "web", apiclient.RunRequest{Command: []string{"sleep", "600"}, TimeoutSeconds: 1}, nil)
		if err != nil || exit.ExitCode != 128+int(syscall.SIGTERM) || exit.Reason != "timed out after 1s" {
			t.Errorf("a run past its time limit: %+v, %v; want SIGTERM's status and why", exit, err)
		}
	})

	t.Run("beyond the concurrent-runs quota", func(t *testing.T) {
		if err := e.Store.SetTenantQuotas(ctx, tenant.ID, store.QuotaOverrides{ConcurrentRuns: ptr.To(1)}); err != nil {
			t.Fatal(err)
		}
		defer e.Store.SetTenantQuotas(ctx, tenant.ID, store.QuotaOverrides{})
		// The first runs until its stdin closes.
		auditStart := countRows(t, e, "audit_log")
		in, typed := io.Pipe()
		first := make(chan apiclient.RunExit, 1)
		go func() {
			exit, _, _, err := runOf(t, c, "web", apiclient.RunRequest{Command: []string{"cat"}}, in)
			if err != nil {
				t.Errorf("the first run: %v", err)
			}
			first <- exit
		}()
		platformtest.Eventually(t, time.Minute, "the first run to run", func(context.Context) error {
			if r := listRuns(t, c, "web")[0]; r.Status != string(store.RunRunning) {
				return fmt.Errorf("run.%d is %s", r.Number, r.Status)
			}
			// Its audit entry is written just after its row.
			if countRows(t, e, "audit_log") == auditStart {
				return errors.New("the first run is not in the audit log yet")
			}
			return nil
		})
		runsBefore, auditBefore := countRows(t, e, "runs"), countRows(t, e, "audit_log")
		_, _, _, err := runOf(t, c, "web", echo, nil)
		var ae *apiclient.Error
		if !errors.As(err, &ae) || ae.Status != http.StatusForbidden || ae.Quota != "concurrentRuns" || !strings.Contains(ae.Message, "concurrentRuns quota (1) is reached: 1 of its one-off runs is running") {
			t.Errorf("a second run with a quota of one: %v, want 403 naming concurrentRuns", err)
		}
		if runs, audit := countRows(t, e, "runs"), countRows(t, e, "audit_log"); runs != runsBefore || audit != auditBefore {
			t.Errorf("the refused run recorded %d runs and %d audit entries", runs-runsBefore, audit-auditBefore)
		}
		typed.Close()
		if exit := <-first; exit.ExitCode != 0 {
			t.Errorf("the first run ended %+v once its stdin closed", exit)
		}
		if exit, stdout, _, err := runOf(t, c, "web", echo, nil); err != nil || stdout != "hello\n" {
			t.Errorf("a run once the first ended: %+v, %v, %q", exit, err, stdout)
		}
	})

	t.Run("recorded and audited", func(t *testing.T) {
		runs := listRuns(t, c, "web")
		if len(runs) < 2 {
			t.Fatalf("runs %+v", runs)
		}
		last, seven := runs[0], runs[len(runs)-1]
		for i := range runs[1:] {
			if runs[i].Number <= runs[i+1].Number {
				t.Errorf("runs not newest first: %d before %d", runs[i].Number, runs[i+1].Number)
			}
		}
		if last.Status != "succeeded" || last.ExitCode == nil || *last.ExitCode != 0 || last.FinishedAt == nil || strings.Join(last.Command, " ") != "echo hello" {
			t.Errorf("the last run: %+v", last)
		}
		if seven.Number != 1 || seven.Release != 3 || seven.Status != "failed" || seven.ExitCode == nil || *seven.ExitCode != 7 ||
			seven.CreatedBy != "token:test" || !strings.Contains(strings.Join(seven.Command, " "), "exit 7") {
			t.Errorf("run.1: %+v, want the one that exited 7, by token:test, in v3", seven)
		}
		var audited []map[string]any
		for _, a := range auditActions(t, e, tenant.ID) {
			if a.Action == "app.run" && a.Target == "web" {
				var d map[string]any
				if err := json.Unmarshal(a.Details, &d); err != nil {
					t.Fatal(err)
				}
				audited = append(audited, d)
			}
		}
		if len(audited) != len(runs) || audited[0]["run"] != float64(1) || !strings.Contains(fmt.Sprint(audited[0]["command"]), "exit 7") {
			t.Errorf("app.run audit entries %v, want one per run (%d)", audited, len(runs))
		}
		// Each end too, saying how.
		ends := runEndEntries(t, e, tenant.ID)
		if len(ends) != len(runs) {
			t.Errorf("%d app.run.end audit entries, want one per run (%d)", len(ends), len(runs))
		}
		howEnded := map[string]store.RunEnd{"": "exited", "the client went away": "disconnected", "timed out after 1s": "timedOut"}
		for _, r := range runs {
			end, ok := ends[r.Number]
			if !ok {
				t.Errorf("run.%d's end is not audited", r.Number)
				continue
			}
			if end.actor != "token:test" || end.Target != "web" || end.Ended != howEnded[r.Reason] || end.Reason != r.Reason ||
				end.ExitCode == nil || r.ExitCode == nil || *end.ExitCode != *r.ExitCode || end.Release != 3 {
				t.Errorf("run.%d (%+v) ended audited as %+v, want by token:test, ended %s", r.Number, r, end, howEnded[r.Reason])
			}
		}
	})
}

// runEnd is an app.run.end audit entry.
type runEnd struct {
	actor, Target string
	store.RunEndDetails
}

// runEndEntries reads the tenant's app.run.end audit entries by run
// number, failing on a run whose end is audited twice.
func runEndEntries(t *testing.T, e *apitest.Env, tenantID string) map[int]runEnd {
	t.Helper()
	ends := map[int]runEnd{}
	for _, a := range auditActions(t, e, tenantID) {
		if a.Action != store.RunEndAction {
			continue
		}
		end := runEnd{actor: a.Actor, Target: a.Target}
		if err := json.Unmarshal(a.Details, &end.RunEndDetails); err != nil {
			t.Fatalf("an app.run.end entry's details %s: %v", a.Details, err)
		}
		if _, twice := ends[end.Run]; twice {
			t.Errorf("run.%d's end audited twice", end.Run)
		}
		ends[end.Run] = end
	}
	return ends
}

// runNumbered returns run.n of the app, as GET .../runs lists it.
func runNumbered(t *testing.T, c *apiclient.Client, app string, n int) apiclient.Run {
	t.Helper()
	for _, r := range listRuns(t, c, app) {
		if r.Number == n {
			return r
		}
	}
	t.Fatalf("run.%d of %s is not listed", n, app)
	return apiclient.Run{}
}

// runLines returns the lines of run.n in the app's log (GET .../logs),
// each "stream: text".
func runLines(t *testing.T, c *apiclient.Client, app string, n int) []string {
	t.Helper()
	var got []string
	err := c.Logs(t.Context(), app, 1000, false, func(l apiclient.LogLine) error {
		if l.Process == "run" && l.Instance == strconv.Itoa(n) {
			got = append(got, l.Stream+": "+l.Text)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// waitRunEnded waits until run.n of the app has ended and returns it.
func waitRunEnded(t *testing.T, c *apiclient.Client, app string, n int) apiclient.Run {
	t.Helper()
	var r apiclient.Run
	platformtest.Eventually(t, time.Minute, fmt.Sprintf("run.%d to end", n), func(context.Context) error {
		if r = runNumbered(t, c, app, n); r.Status == string(store.RunRunning) || r.FinishedAt == nil {
			return fmt.Errorf("run.%d is %s", n, r.Status)
		}
		return nil
	})
	return r
}

// runsEnv starts an API server whose apps' logs are the runtime's, with
// a tenant named name whose app web has release 3, and returns it, the
// tenant, its token and a client with it.
func runsEnv(t *testing.T, name string) (*apitest.Env, store.Tenant, string, *apiclient.Client) {
	t.Helper()
	return runsEnvWith(t, name, apitest.Options{})
}

// runsEnvWith is runsEnv with the API's options opts (RuntimeLogs set).
func runsEnvWith(t *testing.T, name string, opts apitest.Options) (*apitest.Env, store.Tenant, string, *apiclient.Client) {
	t.Helper()
	opts.RuntimeLogs = true
	e := apitest.StartWith(t, cptest.Start(t), opts)
	tenant, token := e.TenantToken(t, name)
	createApp(t, e, token, "web")
	e.SetCurrentRelease(t, name, "web", 3)
	c, err := apiclient.New(e.URL, token, nil)
	if err != nil {
		t.Fatal(err)
	}
	return e, tenant, token, c
}

// TestRunsDetached: POST .../runs with detach answers 202 with the run
// while its command goes on without the client; its output goes to the
// app's log as run.N's lines, how it ended to its record; it holds a
// concurrentRuns slot while it runs and is stopped at its time limit.
// Its refusals are TestRuns'.
func TestRunsDetached(t *testing.T) {
	e, tenant, token, c := runsEnv(t, "detached")
	ctx := t.Context()

	t.Run("an app that never ran has no lines", func(t *testing.T) {
		// The runtime runs nothing of "idle": its logs are empty, not an
		// error, as for any app that has not run yet.
		createApp(t, e, token, "idle")
		a := call(t, e, http.MethodGet, "/apps/idle/logs?tail=10", token, nil)
		if a.status != http.StatusOK || len(bytes.TrimSpace(a.body)) != 0 {
			t.Errorf("logs of an app that never ran: %d %q, want 200 and no line", a.status, a.body)
		}
	})

	t.Run("output to the app's log, exit status to its record", func(t *testing.T) {
		run, err := c.RunDetached(ctx, "web", apiclient.RunRequest{Command: []string{"sh", "-c", "echo out; echo err >&2; exit 7"}})
		if err != nil || run.Number != 1 || run.Release != 3 || !run.Detached || run.Status != string(store.RunRunning) || run.CreatedBy != "token:test" {
			t.Fatalf("a detached run: %+v, %v; want run.1 of v3, running", run, err)
		}
		r := waitRunEnded(t, c, "web", run.Number)
		if r.Status != string(store.RunFailed) || r.ExitCode == nil || *r.ExitCode != 7 || r.Reason != "" || !r.Detached {
			t.Errorf("run.1 ended as %+v, want exit 7", r)
		}
		got := runLines(t, c, "web", run.Number)
		if len(got) != 4 || got[0] != "bex: Running sh -c echo out; echo err >&2; exit 7" || got[3] != "bex: Process exited with status 7" ||
			!slices.Contains(got, "stdout: out") || !slices.Contains(got, "stderr: err") {
			t.Errorf("run.1's lines in the app's log: %q", got)
		}
		audit := auditActions(t, e, tenant.ID)
		start := audit[len(audit)-2]
		var d map[string]any
		if err := json.Unmarshal(start.Details, &d); err != nil || start.Action != "app.run" || d["detached"] != true || d["run"] != float64(1) {
			t.Errorf("the audit entry before the last %s %s, want app.run of run.1, detached", start.Action, start.Details)
		}
		if end := runEndEntries(t, e, tenant.ID)[1]; audit[len(audit)-1].Action != store.RunEndAction || end.actor != "token:test" ||
			end.Ended != "exited" || end.ExitCode == nil || *end.ExitCode != 7 || !end.Detached || end.Reason != "" {
			t.Errorf("the last audit entry %s %s, want app.run.end of run.1, exited 7", audit[len(audit)-1].Action, audit[len(audit)-1].Details)
		}
	})

	t.Run("holds a concurrentRuns slot while it runs", func(t *testing.T) {
		if err := e.Store.SetTenantQuotas(ctx, tenant.ID, store.QuotaOverrides{ConcurrentRuns: ptr.To(1)}); err != nil {
			t.Fatal(err)
		}
		defer e.Store.SetTenantQuotas(ctx, tenant.ID, store.QuotaOverrides{})
		done := filepath.Join(t.TempDir(), "done")
		run, err := c.RunDetached(ctx, "web", apiclient.RunRequest{Command: []string{"sh", "-c", `while [ ! -e "$0" ]; do sleep 0.05; done`, done}})
		if err != nil {
			t.Fatal(err)
		}
		// Its request has ended; the run goes on.
		runsBefore, auditBefore := countRows(t, e, "runs"), countRows(t, e, "audit_log")
		_, _, _, err = runOf(t, c, "web", apiclient.RunRequest{Command: []string{"true"}}, nil)
		var ae *apiclient.Error
		if !errors.As(err, &ae) || ae.Status != http.StatusForbidden || ae.Quota != "concurrentRuns" {
			t.Errorf("a run beside a detached one with a quota of one: %v, want 403 naming concurrentRuns", err)
		}
		if _, err := c.RunDetached(ctx, "web", apiclient.RunRequest{Command: []string{"true"}}); !errors.As(err, &ae) || ae.Status != http.StatusForbidden || ae.Quota != "concurrentRuns" {
			t.Errorf("a second detached run with a quota of one: %v, want 403 naming concurrentRuns", err)
		}
		if runs, audit := countRows(t, e, "runs"), countRows(t, e, "audit_log"); runs != runsBefore || audit != auditBefore {
			t.Errorf("the refused runs recorded %d runs and %d audit entries", runs-runsBefore, audit-auditBefore)
		}
		if r := runNumbered(t, c, "web", run.Number); r.Status != string(store.RunRunning) {
			t.Errorf("run.%d is %s, want still running", r.Number, r.Status)
		}
		if err := os.WriteFile(done, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if r := waitRunEnded(t, c, "web", run.Number); r.Status != string(store.RunSucceeded) {
			t.Errorf("run.%d ended as %+v, want exit 0", r.Number, r)
		}
		if exit, stdout, _, err := runOf(t, c, "web", apiclient.RunRequest{Command: []string{"echo", "hello"}}, nil); err != nil || stdout != "hello\n" {
			t.Errorf("a run once the detached one ended: %+v, %v, %q", exit, err, stdout)
		}
	})

	t.Run("stopped at its time limit", func(t *testing.T) {
		run, err := c.RunDetached(ctx, "web", apiclient.RunRequest{Command: []string{"sleep", "600"}, TimeoutSeconds: 1})
		if err != nil {
			t.Fatal(err)
		}
		r := waitRunEnded(t, c, "web", run.Number)
		if r.Status != string(store.RunFailed) || r.ExitCode == nil || *r.ExitCode != 128+int(syscall.SIGTERM) || r.Reason != "timed out after 1s" {
			t.Errorf("a detached run past its time limit ended as %+v; want SIGTERM's status and why", r)
		}
		if got := runLines(t, c, "web", run.Number); len(got) == 0 || got[len(got)-1] != "bex: Stopped, timed out after 1s (exit status 143)" {
			t.Errorf("run.%d's lines in the app's log: %q", run.Number, got)
		}
	})
}

// runPID starts a detached run of a shell that says its process id and
// then sleeps, and returns the run and that process id, read from the
// app's log.
func runPID(t *testing.T, c *apiclient.Client, app string) (apiclient.Run, int) {
	t.Helper()
	run, err := c.RunDetached(t.Context(), app, apiclient.RunRequest{Command: []string{"sh", "-c", "echo $$; exec sleep 600"}})
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	platformtest.Eventually(t, time.Minute, fmt.Sprintf("run.%d to say its process id", run.Number), func(context.Context) error {
		for _, l := range runLines(t, c, app, run.Number) {
			if n, ok := strings.CutPrefix(l, "stdout: "); ok {
				var err error
				pid, err = strconv.Atoi(n)
				return err
			}
		}
		return errors.New("no line on stdout yet")
	})
	return run, pid
}

// runAttached starts an attached run of sleep 600 through c and returns
// its number once it runs, and a func that waits for how it ended (a
// minute at most: the run goes on ten).
func runAttached(t *testing.T, c *apiclient.Client, app string) (int, func() apiclient.RunExit) {
	t.Helper()
	done := make(chan apiclient.RunExit, 1)
	go func() {
		exit, _, _, err := runOf(t, c, app, apiclient.RunRequest{Command: []string{"sleep", "600"}}, nil)
		if err != nil {
			t.Errorf("the attached run: %v", err)
		}
		done <- exit
	}()
	var number int
	platformtest.Eventually(t, time.Minute, "the attached run to run", func(context.Context) error {
		r := listRuns(t, c, app)[0]
		if r.Status != string(store.RunRunning) || r.Detached {
			return fmt.Errorf("run.%d is %s", r.Number, r.Status)
		}
		number = r.Number
		return nil
	})
	return number, func() apiclient.RunExit {
		t.Helper()
		select {
		case exit := <-done:
			return exit
		case <-time.After(time.Minute):
			t.Fatalf("run.%d has not ended after a minute", number)
			return apiclient.RunExit{}
		}
	}
}

// waitGone waits until process pid is gone.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	platformtest.Eventually(t, time.Minute, fmt.Sprintf("process %d to be gone", pid), func(context.Context) error {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("process %d is still there (%v)", pid, err)
		}
		return nil
	})
}

// TestRunsStop: POST .../runs/{run}/stop ends a detached run's command and
// an attached one's, the record saying it was stopped and by whom (and the
// attached client its exit frame), audited as app.run.stop; a run that
// has ended is a 409, a viewer gets a 403, an unknown run or another
// tenant's a 404, and no refusal changes anything.
func TestRunsStop(t *testing.T) {
	e, tenant, token, c := runsEnv(t, "stops")
	ctx := t.Context()

	t.Run("a detached run", func(t *testing.T) {
		run, pid := runPID(t, c, "web")

		// Refusals first: none touches the run.
		viewer, _ := apiclient.New(e.URL, e.Member(t, token, "vic@stops.test", "viewer"), nil)
		_, otherToken := e.TenantToken(t, "stops-other")
		other, _ := apiclient.New(e.URL, otherToken, nil)
		createApp(t, e, otherToken, "web")
		auditBefore := countRows(t, e, "audit_log")
		var ae *apiclient.Error
		if _, err := viewer.StopRun(ctx, "web", run.Number); !errors.As(err, &ae) || ae.Status != http.StatusForbidden || ae.Role != "developer" {
			t.Errorf("a viewer's stop: %v, want 403 naming the developer role", err)
		}
		if _, err := other.StopRun(ctx, "web", run.Number); !apiclient.IsStatus(err, http.StatusNotFound) {
			t.Errorf("another tenant's stop of run.%d: %v, want 404", run.Number, err)
		}
		if _, err := c.StopRun(ctx, "web", 99); !apiclient.IsStatus(err, http.StatusNotFound) || !strings.Contains(err.Error(), "has no run.99") {
			t.Errorf("a stop of run.99: %v, want 404", err)
		}
		if _, err := c.StopRun(ctx, "nothing", run.Number); !apiclient.IsStatus(err, http.StatusNotFound) {
			t.Errorf("a stop in an app that does not exist: %v, want 404", err)
		}
		for _, ref := range []string{"x", "run.", "-1", "0", "99999999999"} {
			if a := call(t, e, http.MethodPost, "/apps/web/runs/"+ref+"/stop", token, nil); a.status != http.StatusNotFound || !strings.Contains(a.err().Message, "such as run.3") {
				t.Errorf("a stop of run %q: %d %s, want 404 saying how to name a run", ref, a.status, a.body)
			}
		}
		if r := runNumbered(t, c, "web", run.Number); r.Status != string(store.RunRunning) || r.StopRequestedAt != nil {
			t.Errorf("run.%d after the refused stops: %+v, want running, no stop asked", run.Number, r)
		}
		if audit := countRows(t, e, "audit_log"); audit != auditBefore {
			t.Errorf("the refused stops wrote %d audit entries", audit-auditBefore)
		}
		if err := syscall.Kill(pid, 0); err != nil {
			t.Errorf("process %d after the refused stops: %v", pid, err)
		}

		stopped, err := c.StopRun(ctx, "web", run.Number)
		if err != nil || stopped.Number != run.Number || stopped.StopRequestedAt == nil || stopped.StopRequestedBy != "token:test" {
			t.Fatalf("a stop: %+v, %v; want run.%d, asked by token:test", stopped, err, run.Number)
		}
		r := waitRunEnded(t, c, "web", run.Number)
		if r.Status != string(store.RunFailed) || r.ExitCode == nil || *r.ExitCode != 128+int(syscall.SIGTERM) || r.Reason != "stopped by token:test" {
			t.Errorf("run.%d ended as %+v, want SIGTERM's status, stopped by token:test", run.Number, r)
		}
		waitGone(t, pid)
		if got := runLines(t, c, "web", run.Number); len(got) == 0 || got[len(got)-1] != "bex: Stopped, stopped by token:test (exit status 143)" {
			t.Errorf("run.%d's lines in the app's log: %q", run.Number, got)
		}
		_, err = c.StopRun(ctx, "web", run.Number)
		if !errors.As(err, &ae) || ae.Status != http.StatusConflict || !strings.Contains(ae.Message, "has ended already (exit status 143, stopped by token:test)") {
			t.Errorf("a second stop: %v, want 409 saying how it ended", err)
		}
		var stops []map[string]any
		for _, a := range auditActions(t, e, tenant.ID) {
			if a.Action == "app.run.stop" {
				var d map[string]any
				if err := json.Unmarshal(a.Details, &d); err != nil {
					t.Fatal(err)
				}
				stops = append(stops, d)
				if a.Target != "web" || a.Actor != "token:test" {
					t.Errorf("app.run.stop of %s by %s", a.Target, a.Actor)
				}
			}
		}
		if len(stops) != 1 || stops[0]["run"] != float64(run.Number) {
			t.Errorf("app.run.stop audit entries %v, want one of run.%d", stops, run.Number)
		}
		if end := runEndEntries(t, e, tenant.ID)[run.Number]; end.actor != "token:test" || end.Ended != "stopped" || end.StoppedBy != "token:test" ||
			end.ExitCode == nil || *end.ExitCode != 128+int(syscall.SIGTERM) || end.Reason != "stopped by token:test" {
			t.Errorf("run.%d's end audited as %+v, want stopped by token:test", run.Number, end)
		}
	})

	t.Run("an attached run", func(t *testing.T) {
		number, done := runAttached(t, c, "web")
		if _, err := c.StopRun(ctx, "web", number); err != nil {
			t.Fatal(err)
		}
		if exit := done(); exit.Run != number || exit.ExitCode != 128+int(syscall.SIGTERM) || exit.Reason != "stopped by token:test" {
			t.Errorf("the attached run's exit frame %+v, want SIGTERM's status, stopped by token:test", exit)
		}
		if r := waitRunEnded(t, c, "web", number); r.Reason != "stopped by token:test" {
			t.Errorf("run.%d ended as %+v", number, r)
		}
		if end := runEndEntries(t, e, tenant.ID)[number]; end.Ended != "stopped" || end.StoppedBy != "token:test" || end.Detached {
			t.Errorf("the attached run.%d's end audited as %+v, want stopped by token:test", number, end)
		}
	})
}

// TestRunsStopAcrossServers: a stop asked through one API server ends a
// run another server runs (as two replicas of a cluster install), detached
// or attached: the server that runs it reads the stop from the store.
func TestRunsStopAcrossServers(t *testing.T) {
	e, _, token, first := runsEnv(t, "replicas")
	ctx := t.Context()
	second, err := apiclient.New(e.AnotherServer(t), token, nil)
	if err != nil {
		t.Fatal(err)
	}

	run, pid := runPID(t, first, "web")
	if _, err := second.StopRun(ctx, "web", run.Number); err != nil {
		t.Fatal(err)
	}
	r := waitRunEnded(t, first, "web", run.Number)
	if r.ExitCode == nil || *r.ExitCode != 128+int(syscall.SIGTERM) || r.Reason != "stopped by token:test" {
		t.Errorf("the detached run.%d stopped through the other server ended as %+v, want SIGTERM's status, stopped by token:test", run.Number, r)
	}
	waitGone(t, pid)

	number, done := runAttached(t, first, "web")
	if _, err := second.StopRun(ctx, "web", number); err != nil {
		t.Fatal(err)
	}
	if exit := done(); exit.ExitCode != 128+int(syscall.SIGTERM) || exit.Reason != "stopped by token:test" {
		t.Errorf("the attached run stopped through the other server: exit frame %+v", exit)
	}
}

// idleProxy is a TCP proxy to target that closes a connection on which
// target sent nothing for idle, as nginx's proxy_read_timeout or a load
// balancer's idle timeout does. It returns the proxy's URL.
func idleProxy(t *testing.T, target string, idle time.Duration) string {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			down, err := l.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", u.Host)
			if err != nil {
				down.Close()
				continue
			}
			go func() {
				_, _ = io.Copy(up, down)
				up.Close()
			}()
			go func() {
				defer down.Close()
				defer up.Close()
				buf := make([]byte, 32<<10)
				for {
					_ = up.SetReadDeadline(time.Now().Add(idle))
					n, err := up.Read(buf)
					if n > 0 {
						if _, werr := down.Write(buf[:n]); werr != nil {
							return
						}
					}
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	return "http://" + l.Addr().String()
}

// TestRunsKeepAlive: an attached run whose command writes nothing for
// longer than a proxy in front of the API lets a connection idle keeps
// its connection through that proxy with keep-alive frames, and gets its
// output and exit status; a server that sends none loses the run's
// connection there.
func TestRunsKeepAlive(t *testing.T) {
	const idle = 500 * time.Millisecond
	e := apitest.StartWith(t, cptest.Start(t), apitest.Options{RunKeepAlive: idle / 4})
	_, token := e.TenantToken(t, "keepalive")
	createApp(t, e, token, "web")
	e.SetCurrentRelease(t, "keepalive", "web", 3)
	quiet := apiclient.RunRequest{Command: []string{"sh", "-c", "sleep 2; echo done"}}

	c, err := apiclient.New(idleProxy(t, e.URL, idle), token, nil)
	if err != nil {
		t.Fatal(err)
	}
	exit, stdout, _, err := runOf(t, c, "web", quiet, nil)
	if err != nil || exit.ExitCode != 0 || stdout != "done\n" {
		t.Errorf("a quiet run through the proxy, with keep-alive frames: %+v %q, %v; want done and exit 0", exit, stdout, err)
	}

	without := e.AnotherServerWith(t, func(o *api.Options) { o.RunKeepAlive = -1 })
	c, err = apiclient.New(idleProxy(t, without, idle), token, nil)
	if err != nil {
		t.Fatal(err)
	}
	if exit, stdout, _, err := runOf(t, c, "web", quiet, nil); err == nil || !strings.Contains(err.Error(), "connection ended before its exit status came") {
		t.Errorf("a quiet run through the proxy, without keep-alive frames: %+v %q, %v; want the connection lost", exit, stdout, err)
	}
}

// TestRunsLost: the runs of an API server that stops answering (its
// listener gone, no more heartbeats) are marked lost by a live server's
// sweep once the deadline has passed — status lost, no exit status, the
// reason saying why, a stop asked of one kept — and stop counting in the
// tenant's quota at once; the live server's own run stays running through
// its sweeps across the deadline; a stop of a lost run is a 409 saying
// so; and the dead server's stop watch, still alive in this process as on
// a machine cut off, ends the command it finds marked lost.
func TestRunsLost(t *testing.T) {
	e := apitest.StartWith(t, cptest.Start(t), apitest.Options{RuntimeLogs: true, RunHeartbeat: 200 * time.Millisecond, RunLostAfter: 2 * time.Second})
	ctx := t.Context()
	tenant, token := e.TenantToken(t, "lost")
	createApp(t, e, token, "web")
	e.SetCurrentRelease(t, "lost", "web", 3)
	live, err := apiclient.New(e.URL, token, nil)
	if err != nil {
		t.Fatal(err)
	}
	url, die := e.DyingServer(t)
	dying, err := apiclient.New(url, token, nil)
	if err != nil {
		t.Fatal(err)
	}

	kept, _ := runPID(t, live, "web")
	cut, cutPID := runPID(t, dying, "web")
	// A run whose server never says it is alive after recording it, asked
	// to stop: nothing runs it to end it.
	ghost, err := e.Store.CreateRun(ctx, store.NewRun{TenantID: tenant.ID, App: "web", Release: 3, Command: []string{"sleep", "600"}, CreatedBy: "a@lost.test", ServerID: uuid.NewString()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := live.StopRun(ctx, "web", ghost.Number); err != nil {
		t.Fatal(err)
	}
	if q, err := live.Quota(ctx); err != nil || q.Usage.RunningRuns != 3 {
		t.Fatalf("runs running before a server dies: %+v, %v; want 3", q.Usage, err)
	}

	die()
	platformtest.Eventually(t, time.Minute, "the dead server's runs to be lost", func(context.Context) error {
		for _, n := range []int{cut.Number, ghost.Number} {
			if r := runNumbered(t, live, "web", n); r.Status != string(store.RunLost) {
				return fmt.Errorf("run.%d is %s", n, r.Status)
			}
		}
		return nil
	})
	for _, n := range []int{cut.Number, ghost.Number} {
		r := runNumbered(t, live, "web", n)
		if r.ExitCode != nil || r.Reason != store.LostRunReason || r.FinishedAt == nil {
			t.Errorf("lost run.%d: %+v; want no exit status, reason %q, finished", n, r, store.LostRunReason)
		}
	}
	if r := runNumbered(t, live, "web", ghost.Number); r.StopRequestedBy != "token:test" {
		t.Errorf("the lost run asked to stop: %+v; want its asker kept", r)
	}
	if r := runNumbered(t, live, "web", kept.Number); r.Status != string(store.RunRunning) {
		t.Errorf("the live server's run.%d once the other's were lost: %+v; want running", kept.Number, r)
	}
	if q, err := live.Quota(ctx); err != nil || q.Usage.RunningRuns != 1 {
		t.Errorf("runs running once two were lost: %+v, %v; want 1", q.Usage, err)
	}
	var ae *apiclient.Error
	if _, err := live.StopRun(ctx, "web", cut.Number); !errors.As(err, &ae) || ae.Status != http.StatusConflict ||
		!strings.Contains(ae.Message, "has ended already (lost, "+store.LostRunReason+")") {
		t.Errorf("a stop of a lost run: %v, want 409 saying it was lost", err)
	}

	// The cut-off server learns its run was lost and ends it; the record
	// stays lost.
	waitGone(t, cutPID)
	if got := runLines(t, live, "web", cut.Number); len(got) == 0 || !strings.HasPrefix(got[len(got)-1], "bex: Stopped, marked lost: "+store.LostRunReason) {
		t.Errorf("run.%d's lines in the app's log: %q", cut.Number, got)
	}
	if r := runNumbered(t, live, "web", cut.Number); r.Status != string(store.RunLost) || r.ExitCode != nil {
		t.Errorf("run.%d once its command ended: %+v; want still lost", cut.Number, r)
	}

	// bex ps through the live server lists its run alone: the lost ones
	// have ended.
	if is := instancesOf(t, e, token, "web"); len(is.Runs) != 1 || is.Runs[0].Number != kept.Number {
		t.Errorf("runs in the instances once two were lost: %+v, want run.%d alone", is.Runs, kept.Number)
	}

	if _, err := live.StopRun(ctx, "web", kept.Number); err != nil {
		t.Fatal(err)
	}
	if r := waitRunEnded(t, live, "web", kept.Number); r.Status != string(store.RunFailed) || r.Reason != "stopped by token:test" {
		t.Errorf("the live server's run stopped: %+v", r)
	}

	// Each lost run's end is audited once, by the platform, though the
	// cut-off server ended its command since; the stopped one's by who
	// started it.
	ends := runEndEntries(t, e, tenant.ID)
	for _, tc := range []struct {
		number int
		by     string
	}{{cut.Number, "token:test"}, {ghost.Number, "a@lost.test"}} {
		if end := ends[tc.number]; end.actor != store.PlatformActor || end.Ended != "lost" || end.ExitCode != nil || end.Reason != store.LostRunReason || end.StartedBy != tc.by {
			t.Errorf("lost run.%d's end audited as %+v, want lost, by the platform, started by %s", tc.number, end, tc.by)
		}
	}
	if end := ends[kept.Number]; end.actor != "token:test" || end.Ended != "stopped" {
		t.Errorf("run.%d's end audited as %+v, want stopped, by token:test", kept.Number, end)
	}
	if len(ends) != 3 {
		t.Errorf("%d app.run.end entries, want 3: %+v", len(ends), ends)
	}
}

// TestRunEndWrittenLater: a run whose end cannot be written when its
// command exits (its row locked past the 10 s the write has) is recorded,
// and audited once, at a later heartbeat once the store answers; until
// then it stays running and is not taken for lost.
func TestRunEndWrittenLater(t *testing.T) {
	e, tenant, _, c := runsEnvWith(t, "later", apitest.Options{RunHeartbeat: 200 * time.Millisecond, RunLostAfter: 30 * time.Second})
	ctx := t.Context()
	done := filepath.Join(t.TempDir(), "done")
	run, err := c.RunDetached(ctx, "web", apiclient.RunRequest{Command: []string{"sh", "-c", `while [ ! -e "$0" ]; do sleep 0.05; done; exit 5`, done}})
	if err != nil {
		t.Fatal(err)
	}
	tx, err := e.Store.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err := tx.Exec(ctx, "SELECT 1 FROM runs WHERE tenant_id = $1 FOR UPDATE", tenant.ID); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(done, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// The write of the end waits on the lock and gives up; the server
	// writes it again: another write waits, begun after the first.
	waiting := func() (time.Time, error) {
		var at *time.Time
		err := e.Store.Pool().QueryRow(ctx, "SELECT max(a.query_start) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "+
			"WHERE NOT l.granted AND a.datname = current_database() AND a.query LIKE '%UPDATE runs%'").Scan(&at)
		if at == nil {
			return time.Time{}, err
		}
		return *at, err
	}
	var first time.Time
	platformtest.Eventually(t, time.Minute, "the end's write to wait on the lock", func(context.Context) (err error) {
		if first, err = waiting(); err == nil && first.IsZero() {
			err = errors.New("no write waits")
		}
		return err
	})
	platformtest.Eventually(t, time.Minute, "the end's write to be tried again", func(context.Context) error {
		if at, err := waiting(); err != nil || !at.After(first) {
			return fmt.Errorf("the write waiting began at %s (the first at %s), %v", at, first, err)
		}
		return nil
	})
	if r := runNumbered(t, c, "web", run.Number); r.Status != string(store.RunRunning) {
		t.Fatalf("run.%d with its row locked: %+v; want running still", run.Number, r)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	r := waitRunEnded(t, c, "web", run.Number)
	if r.Status != string(store.RunFailed) || r.ExitCode == nil || *r.ExitCode != 5 {
		t.Errorf("run.%d once the store answers: %+v; want exit 5", run.Number, r)
	}
	if end, ok := runEndEntries(t, e, tenant.ID)[run.Number]; !ok || end.Ended != store.RunExited || end.ExitCode == nil || *end.ExitCode != 5 {
		t.Errorf("run.%d's end in the audit log: %+v (%v); want exited 5", run.Number, end, ok)
	}
}
