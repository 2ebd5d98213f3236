package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"golang.org/x/term"

	"bex.co/bex/cmd/bex/app"
	"bex.co/bex/cmd/internal/cmdtest"
	"bex.co/bex/internal/controlplane/cptest"
	"bex.co/bex/internal/sandbox/sandboxtest"
	"bex.co/bex/test/platformtest"
	"bex.co/bex/web/api/apiclient"
	"bex.co/bex/web/api/apitest"
)

// bexRunWith runs bex as its main does with env and stdin.
func bexRunWith(t *testing.T, env map[string]string, stdin string, args ...string) (string, string, int) {
	t.Helper()
	return bexRun(t, app.IO{In: strings.NewReader(stdin), ConfigDir: t.TempDir(), Getenv: func(k string) string { return env[k] }}, args...)
}

// TestRunCLI: bex run streams the command's stdout and stderr apart and
// exits with its status, saying nothing of its own; stdin goes to the
// command with -i only; a stopped run says why; a refusal exits with its kind's code (409: 4) and the
// API's reason; bex runs lists the runs; -i for an app whose runs take no
// input is refused; bex run -d says the run is up and exits, its output
// reaching bex logs and how it ended bex runs, or prints the run with
// -o json, and refuses -i.
func TestRunCLI(t *testing.T) {
	e := apitest.StartWith(t, cptest.Start(t), apitest.Options{RuntimeLogs: true})
	_, token := e.TenantToken(t, "clirun")
	env := map[string]string{"BEX_API": e.URL, "BEX_TOKEN": token}
	if _, stderr, code := bexRunWith(t, env, "", "apps", "create", "shop"); code != 0 {
		t.Fatal(stderr)
	}

	if _, stderr, code := bexRunWith(t, env, "", "run", "shop", "--", "true"); code != app.ExitConflict || !strings.Contains(stderr, "has no release to run a command in yet: push to its git remote first") {
		t.Errorf("a run before any release: exit %d, %q", code, stderr)
	}
	e.SetCurrentRelease(t, "clirun", "shop", 2)

	for _, tc := range []struct {
		name                 string
		stdin                string
		args                 []string
		stdout, stderr       string
		code                 int
		stderrMatch, without string
	}{
		{name: "output and exit status", args: []string{"run", "shop", "--", "sh", "-c", "echo out; echo err >&2; exit 7"},
			stdout: "out\n", stderr: "err\n", code: 7},
		{name: "the release's environment", args: []string{"run", "shop", "--", "sh", "-c", `echo "v$RUN_RELEASE"`}, stdout: "v2\n"},
		{name: "without -- when the command has no flags", args: []string{"run", "shop", "echo", "hello", "there"}, stdout: "hello there\n"},
		{name: "stdin closed without -i", stdin: "typed\n", args: []string{"run", "shop", "--", "cat"}},
		{name: "stdin forwarded with -i", stdin: "typed\n", args: []string{"run", "-i", "shop", "--", "cat"}, stdout: "typed\n"},
		{name: "a run stopped at its time limit", args: []string{"run", "shop", "--timeout", "1s", "--", "sleep", "600"},
			stderr: "bex: run.6 of shop: timed out after 1s (exit status 143)\n", code: 143},
		{name: "no command", args: []string{"run", "shop"}, code: 2, stderrMatch: `no command to run: bex run APP -- COMMAND`},
		{name: "more than the app before --", args: []string{"run", "shop", "extra", "--", "true"}, code: 2, stderrMatch: `give the app alone before --`},
		{name: "a bad timeout", args: []string{"run", "shop", "--timeout", "25h", "--", "true"}, code: 2, stderrMatch: `--timeout 25h0m0s: whole seconds, at most 24h0m0s`},
		{name: "an unknown app", args: []string{"run", "nothing", "--", "true"}, code: app.ExitNotFound, stderrMatch: `app "nothing" not found`},
		{name: "detached with -i", args: []string{"run", "-d", "-i", "shop", "--", "cat"}, code: 2, stderrMatch: `--detach with -i: a detached run reads no input`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr, code := bexRunWith(t, env, tc.stdin, tc.args...)
			if code != tc.code || stdout != tc.stdout {
				t.Errorf("exit %d, stdout %q, stderr %q; want %d, %q", code, stdout, stderr, tc.code, tc.stdout)
			}
			switch {
			case tc.stderrMatch != "":
				if !regexp.MustCompile(tc.stderrMatch).MatchString(stderr) {
					t.Errorf("stderr %q, want it to match %q", stderr, tc.stderrMatch)
				}
			case stderr != tc.stderr:
				t.Errorf("stderr %q, want %q", stderr, tc.stderr)
			}
		})
	}

	stdout, stderr, code := bexRunWith(t, env, "", "runs", "shop")
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if code != 0 || len(lines) != 7 {
		t.Fatalf("bex runs: exit %d, %q\n%s", code, stderr, stdout)
	}
	for i, want := range map[int]string{
		0: `^RUN +COMMAND +RELEASE +BY +STARTED +TOOK +STATUS$`,
		1: `^run\.6 +sleep 600 +v2 +token:test +\S+ \S+ +\d+s +exit 143: timed out after 1s$`,
		2: `^run\.5 +cat +v2 .* exit 0$`,
		6: `^run\.1 +sh -c 'echo out; echo err >&2; exit 7' +v2 +token:test .* exit 7$`,
	} {
		if !regexp.MustCompile(want).MatchString(lines[i]) {
			t.Errorf("bex runs line %d %q, want it to match %q\n%s", i, lines[i], want, stdout)
		}
	}
	stdout, _, _ = bexRunWith(t, env, "", "runs", "shop", "-o", "json")
	var runs []apiclient.Run
	if err := json.Unmarshal([]byte(stdout), &runs); err != nil || len(runs) != 6 || runs[0].Number != 6 || runs[5].ExitCode == nil || *runs[5].ExitCode != 7 {
		t.Errorf("bex runs -o json: %v\n%s", err, stdout)
	}

	// Detached: bex says the run is up and exits; the output is in bex
	// logs, the end in bex runs.
	stdout, stderr, code = bexRunWith(t, env, "typed\n", "run", "--detach", "shop", "--", "sh", "-c", "echo detached out; exit 3")
	if want := "Running sh -c 'echo detached out; exit 3' on shop... up, run.7\nUse bex logs shop -f to see its output, bex runs shop how it ended.\n"; code != 0 || stdout != want || stderr != "" {
		t.Errorf("bex run --detach: exit %d, stdout %q, stderr %q; want 0, %q", code, stdout, stderr, want)
	}
	platformtest.Eventually(t, time.Minute, "run.7 to end", func(context.Context) error {
		stdout, _, _ := bexRunWith(t, env, "", "runs", "shop")
		if !regexp.MustCompile(`(?m)^run\.7 +sh -c 'echo detached out; exit 3' +v2 .* exit 3$`).MatchString(stdout) {
			return fmt.Errorf("bex runs:\n%s", stdout)
		}
		return nil
	})
	if stdout, _, code := bexRunWith(t, env, "", "logs", "shop"); code != 0 || !regexp.MustCompile(`(?m)^\S+ run\.7: detached out$`).MatchString(stdout) ||
		!regexp.MustCompile(`(?m)^\S+ run\.7: Process exited with status 3$`).MatchString(stdout) {
		t.Errorf("bex logs after a detached run: exit %d\n%s", code, stdout)
	}
	stdout, stderr, code = bexRunWith(t, env, "", "run", "-d", "shop", "-o", "json", "--", "true")
	var detached apiclient.Run
	if err := json.Unmarshal([]byte(stdout), &detached); err != nil || code != 0 || detached.Number != 8 || !detached.Detached || detached.Release != 2 || detached.Status != "running" {
		t.Errorf("bex run -d -o json: exit %d, %v, stdout %q, stderr %q", code, err, stdout, stderr)
	}
	platformtest.Eventually(t, time.Minute, "run.8 to end", func(context.Context) error {
		stdout, _, _ := bexRunWith(t, env, "", "runs", "shop", "-o", "json")
		var runs []apiclient.Run
		if err := json.Unmarshal([]byte(stdout), &runs); err != nil || len(runs) == 0 || runs[0].Number != 8 || runs[0].Status != "succeeded" {
			return fmt.Errorf("bex runs -o json: %v\n%s", err, stdout)
		}
		return nil
	})

	// A runtime that takes no input: -i is refused saying what to do, and
	// the command runs without it.
	e.Releaser.SetRunsTakeNoInput(true)
	defer e.Releaser.SetRunsTakeNoInput(false)
	if _, stderr, code := bexRunWith(t, env, "typed\n", "run", "-i", "shop", "--", "cat"); code != app.ExitUsage || !strings.Contains(stderr, "reads no input") || !strings.Contains(stderr, "without -i") {
		t.Errorf("-i on a runtime that takes no input: exit %d, %q; want %d saying to run without -i", code, stderr, app.ExitUsage)
	}
	if stdout, stderr, code := bexRunWith(t, env, "typed\n", "run", "shop", "--", "echo", "hi"); code != 0 || stdout != "hi\n" {
		t.Errorf("a run without -i on a runtime that takes no input: exit %d, %q, %q", code, stdout, stderr)
	}

	// On a terminal bex asks for one; the runtime refuses it, and bex
	// runs the command without, saying so, its output on the terminal.
	_, tty, output, checkMode := bexTerminal(t)
	var errOut bytes.Buffer
	code = app.Run(t.Context(), app.IO{In: tty, Out: tty, Err: &errOut, ConfigDir: t.TempDir(), Getenv: func(k string) string { return env[k] }},
		[]string{"run", "shop", "--", "echo", "on the terminal"})
	if code != 0 || !strings.Contains(errOut.String(), "runs where a one-off command has no terminal and reads no input: running it without") {
		t.Errorf("a run from a terminal on a runtime that takes no input: exit %d, stderr %q; want 0, saying it runs without a terminal", code, errOut.String())
	}
	platformtest.Eventually(t, 10*time.Second, "the output on the terminal", func(context.Context) error {
		if !strings.Contains(output.String(), "on the terminal") {
			return fmt.Errorf("the terminal shows %q", output.String())
		}
		return nil
	})
	checkMode(t)
}

// TestRunOnTerminalCLI runs the bex binary on a pseudo-terminal of 80×24,
// its controlling terminal, as a shell runs it, on an API whose runs are
// sandboxed: the command runs on a terminal (tty names it) of that size;
// bex's terminal is raw, so a line typed is echoed once (by the command's
// terminal) and Ctrl-C reaches the command as its terminal's interrupt
// instead of interrupting bex; resizing bex's terminal (the kernel's
// SIGWINCH) resizes the command's (stty size says 40 100); bex exits with
// the command's status and gives its terminal back in the mode it found
// it.
func TestRunOnTerminalCLI(t *testing.T) {
	sandboxtest.Require(t)
	bin := cmdtest.Build(t, "bex")
	e := apitest.StartWith(t, cptest.Start(t), apitest.Options{Sandbox: true})
	_, token := e.TenantToken(t, "cliterminal")
	env := map[string]string{"BEX_API": e.URL, "BEX_TOKEN": token}
	if _, stderr, code := bexRunWith(t, env, "", "apps", "create", "shop"); code != 0 {
		t.Fatal(stderr)
	}
	e.SetCurrentRelease(t, "cliterminal", "shop", 2)

	master, tty, output, checkMode := bexTerminal(t)
	cmd := exec.CommandContext(t.Context(), bin, "run", "shop", "--", "sh", "-c", apitest.TerminalScript)
	cmd.Env = []string{"BEX_API=" + e.URL, "BEX_TOKEN=" + token, "HOME=" + t.TempDir()}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	apitest.TerminalDialogue(t, output, master, func(cols, rows uint16) {
		// bex's terminal's new size: the kernel sends bex SIGWINCH.
		if err := unix.IoctlSetWinsize(int(tty.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: rows, Col: cols}); err != nil {
			t.Fatal(err)
		}
	})
	// A line typed: echoed by the command's terminal alone.
	if n := strings.Count(output.String(), "keystrokes"); n != 1 {
		t.Errorf("the terminal shows the line typed %d times, want once (bex's terminal raw, the command's echoing): %q", n, output.String())
	}
	var err error
	select {
	case err = <-exited:
	case <-time.After(time.Minute):
		t.Fatalf("bex did not exit on Ctrl-C; the terminal shows %q", output.String())
	}
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 9 || !strings.Contains(output.String(), "caught INT") {
		t.Errorf("bex after Ctrl-C: %v, the terminal shows %q; want exit status 9 after caught INT", err, output.String())
	}
	checkMode(t)
}

// bexTerminal opens a pseudo-terminal for bex (openPTY) and copies what
// it shows into output; checkMode fails the test when the terminal is no
// longer in the mode it had here, as bex must give it back.
func bexTerminal(t *testing.T) (master, tty *os.File, output *platformtest.SyncBuffer, checkMode func(*testing.T)) {
	t.Helper()
	master, tty = openPTY(t)
	output = &platformtest.SyncBuffer{}
	go func() { _, _ = io.Copy(output, master) }()
	before, err := term.GetState(int(tty.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	return master, tty, output, func(t *testing.T) {
		t.Helper()
		if after, err := term.GetState(int(tty.Fd())); err != nil || *after != *before {
			t.Errorf("bex left the terminal in another mode than it found it (%v)", err)
		}
	}
}

// openPTY opens a pseudo-terminal: its master, which the test reads, and
// its terminal, 80 by 24, which bex gets as stdin and stdout.
func openPTY(t *testing.T) (master, tty *os.File) {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("opening a pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { master.Close() })
	var n int
	conn, err := master.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var ioctlErr error
	if err := conn.Control(func(fd uintptr) {
		if ioctlErr = unix.IoctlSetPointerInt(int(fd), unix.TIOCSPTLCK, 0); ioctlErr == nil {
			n, ioctlErr = unix.IoctlGetInt(int(fd), unix.TIOCGPTN)
		}
	}); err != nil || ioctlErr != nil {
		t.Fatalf("unlocking the pseudo-terminal: %v %v", err, ioctlErr)
	}
	tty, err = os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("opening the terminal of the pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { tty.Close() })
	if err := unix.IoctlSetWinsize(int(tty.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 24, Col: 80}); err != nil {
		t.Fatal(err)
	}
	return master, tty
}
