package api_test

import (
	"io"
	"strings"
	"testing"
	"time"

	"bex.co/bex/internal/sandbox/sandboxtest"
	"bex.co/bex/test/platformtest"
	"bex.co/bex/web/api/apiclient"
	"bex.co/bex/web/api/apitest"
)

// TestRunsOnTerminal: a run asked on a terminal of 80×24 (terminal, cols,
// rows: what bex run asks from a terminal) runs on a pseudo-terminal of
// its sandbox of that size: tty names it; the stdin frames are the
// terminal's keystrokes, which it echoes and which make lines (Enter's
// \r), and Ctrl-C is its interrupt; a resize frame reaches it (stty size
// says 40 100 after one); everything comes as stdout frames, and the exit
// frame carries the command's status. Without the terminal tty says "not
// a tty", nothing echoes and Ctrl-C is a byte read; without the resize
// stty keeps saying 24 80.
func TestRunsOnTerminal(t *testing.T) {
	sandboxtest.Require(t)
	_, _, _, c := runsEnvWith(t, "runsterminal", apitest.Options{Sandbox: true})

	in, typed := io.Pipe()
	defer typed.Close()
	sizes := make(chan apiclient.TerminalSize)
	var stdout, stderr platformtest.SyncBuffer
	type ended struct {
		exit apiclient.RunExit
		err  error
	}
	done := make(chan ended, 1)
	go func() {
		exit, err := c.Run(t.Context(), "web", apiclient.RunRequest{Command: []string{"sh", "-c", apitest.TerminalScript}, Terminal: true, Cols: 80, Rows: 24},
			apiclient.RunStreams{Stdin: in, Stdout: &stdout, Stderr: &stderr, Resize: sizes})
		if err != nil {
			t.Errorf("the run: %v", err)
		}
		done <- ended{exit, err}
	}()
	apitest.TerminalDialogue(t, &stdout, typed, func(cols, rows uint16) {
		select {
		case sizes <- apiclient.TerminalSize{Cols: cols, Rows: rows}:
		case <-t.Context().Done():
			t.Fatal("the resize was not sent")
		}
	})
	// A line typed: the terminal echoes it, and Enter (\r) ends it.
	if !strings.Contains(stdout.String(), "keystrokes\r\ngot 10 characters\r\n") {
		t.Errorf("the terminal shows %q, want the line typed echoed before the answer", stdout.String())
	}
	var end ended
	select {
	case end = <-done:
	case <-time.After(time.Minute):
		t.Fatalf("the run did not end on Ctrl-C; the terminal shows %q", stdout.String())
	}
	if end.err != nil || end.exit.ExitCode != 9 || end.exit.Reason != "" || end.exit.Release != 3 || !strings.Contains(stdout.String(), "caught INT") {
		t.Errorf("after Ctrl-C: exit %+v, %v, the terminal shows %q; want exit 9 after caught INT", end.exit, end.err, stdout.String())
	}
	if stderr.String() != "" {
		t.Errorf("stderr frames %q: on a terminal everything comes as stdout", stderr.String())
	}
	if r := listRuns(t, c, "web")[0]; !r.Terminal || r.Status != "failed" || r.ExitCode == nil || *r.ExitCode != 9 {
		t.Errorf("the run's record %+v, want on a terminal, failed with 9", r)
	}
}
