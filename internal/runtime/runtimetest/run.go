package runtimetest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"

	"bex.co/bex/internal/runtime"
	"bex.co/bex/test/platformtest"
)

// oneOff is one Run of the suite: its streams and what Attach saw.
type oneOff struct {
	stdout, stderr platformtest.SyncBuffer
	stdin          io.Reader
	resize         chan runtime.TerminalSize
	// release is what Attach was called with; 0 when it was not.
	release int
}

// command returns a Command of args whose Attach gives o's streams.
func (o *oneOff) command(name string, args ...string) runtime.Command {
	return runtime.Command{Args: args, Name: name, Attach: func(release int) (runtime.Streams, error) {
		o.release = release
		return runtime.Streams{Stdin: o.stdin, Stdout: &o.stdout, Stderr: &o.stderr, Resize: o.resize}, nil
	}}
}

// run: a one-off command of a release runs with the release's
// environment and no PORT, its output and exit status come back, its
// stdin is what the caller gives; ending its context stops it and says
// why; an Attach that fails runs nothing; the app itself is not deployed
// by it. A driver that is no runtime.Runner skips it; one that takes no
// input (Harness.NoInput) refuses input and a terminal before anything
// runs.
func (s *suite) run(t *testing.T) {
	d := s.newDriver(t)
	r, ok := d.(runtime.Runner)
	if !ok {
		t.Skip("the driver runs no one-off commands")
	}
	const app = "run"
	rel := s.release(t, app, 4, "v4", nil)
	ctx := s.ctx(t)

	t.Run("output and exit status", func(t *testing.T) {
		var o oneOff
		exit, err := r.Run(ctx, rel, o.command("run.1", "sh", "-c", "echo out; echo err >&2; exit 7"))
		if err != nil {
			t.Fatal(err)
		}
		if exit.Code != 7 || exit.Reason != "" || o.stdout.String() != "out\n" || o.stderr.String() != "err\n" {
			t.Errorf("exit %+v, stdout %q, stderr %q; want 7, out, err", exit, o.stdout.String(), o.stderr.String())
		}
		if o.release != 4 {
			t.Errorf("Attach was called with release %d, want 4", o.release)
		}
	})

	t.Run("the release's environment, without PORT", func(t *testing.T) {
		var o oneOff
		exit, err := r.Run(ctx, rel, o.command("run.2", "sh", "-c", `echo "$`+EnvVersion+`:${PORT:-none}"`))
		if err != nil || exit.Code != 0 || o.stdout.String() != "v4:none\n" {
			t.Errorf("exit %+v, %v, stdout %q; want v4:none", exit, err, o.stdout.String())
		}
	})

	t.Run("stdin", func(t *testing.T) {
		o := oneOff{stdin: strings.NewReader("hello\nworld\n")}
		cmd := o.command("run.3", "cat")
		cmd.Stdin = true
		exit, err := r.Run(ctx, rel, cmd)
		switch {
		case s.h.NoInput:
			if !errors.Is(err, runtime.ErrNoInput) || o.release != 0 {
				t.Errorf("cat of hello, world on a driver that takes no input: %v, Attach called with %d; want ErrNoInput before Attach", err, o.release)
			}
		case err != nil || exit.Code != 0 || o.stdout.String() != "hello\nworld\n":
			t.Errorf("cat of hello, world: exit %+v, %v, stdout %q", exit, err, o.stdout.String())
		}
		var none oneOff
		exit, err = r.Run(ctx, rel, none.command("run.4", "cat"))
		if err != nil || exit.Code != 0 || none.stdout.String() != "" {
			t.Errorf("cat without stdin: exit %+v, %v, stdout %q; want it to end at once", exit, err, none.stdout.String())
		}
	})

	t.Run("ending the context stops the command", func(t *testing.T) {
		// Its stdin stays open: only the end of the context ends it.
		in, _ := io.Pipe()
		defer in.Close()
		o := oneOff{stdin: in}
		runCtx, cancel := context.WithCancelCause(ctx)
		defer cancel(nil)
		type result struct {
			exit runtime.Exit
			err  error
		}
		done := make(chan result, 1)
		go func() {
			cmd := o.command("run.5", "sh", "-c", "echo started; exec sleep 600")
			cmd.Stdin = !s.h.NoInput
			exit, err := r.Run(runCtx, rel, cmd)
			done <- result{exit, err}
		}()
		s.eventually(t, "the command to start", func() error {
			if o.stdout.String() != "started\n" {
				return fmt.Errorf("stdout %q", o.stdout.String())
			}
			return nil
		})
		cancel(errors.New("the client went away"))
		select {
		case res := <-done:
			if res.err != nil || res.exit.Code == 0 || res.exit.Reason != "the client went away" {
				t.Errorf("stopped run: exit %+v, %v; want a signal's status and the context's cause", res.exit, res.err)
			}
		case <-ctx.Done():
			t.Fatal("the command still runs after its context ended")
		}
	})

	t.Run("an Attach that fails runs nothing", func(t *testing.T) {
		refused := errors.New("over the quota")
		cmd := runtime.Command{Args: []string{"sh", "-c", "echo ran"}, Name: "run.6", Attach: func(int) (runtime.Streams, error) {
			return runtime.Streams{}, refused
		}}
		if _, err := r.Run(ctx, rel, cmd); !errors.Is(err, refused) {
			t.Errorf("Run with a failing Attach: %v, want its error", err)
		}
	})

	if s.h.Logs {
		t.Run("output to the app's log", func(t *testing.T) { s.runToLog(t, d, r) })
	}
	if s.h.Terminal {
		t.Run("terminal", func(t *testing.T) { s.runOnTerminal(t, r, rel) })
	}
	if s.h.NoInput {
		t.Run("no terminal", func(t *testing.T) {
			var o oneOff
			cmd := o.command("run.7", "sh")
			cmd.Terminal, cmd.Size = true, runtime.TerminalSize{Cols: 80, Rows: 24}
			if _, err := r.Run(ctx, rel, cmd); !errors.Is(err, runtime.ErrNoInput) || o.release != 0 {
				t.Errorf("a terminal on a driver that has none: %v, Attach called with %d; want ErrNoInput before Attach", err, o.release)
			}
		})
	}
	if _, err := d.Status(ctx, "suite", app); !errors.Is(err, runtime.ErrNotFound) {
		t.Errorf("after runs only, Status of the app: %v; want ErrNotFound: a run deploys nothing", err)
	}
}

// runToLog: a command whose Attach asks for the app's log
// (Streams.Log), as a detached run's does, has its output there as the
// lines of the instance named, stdout and stderr apart, between a line of
// the platform's saying it runs
// and one saying how it ended; the app's instances keep running.
func (s *suite) runToLog(t *testing.T, d runtime.Driver, r runtime.Runner) {
	ctx := s.ctx(t)
	rel := s.release(t, "runlog", 1, "v1", nil)
	if err := d.Deploy(ctx, rel, nil); err != nil {
		t.Fatalf("deploying: %v", err)
	}
	defer d.Remove(ctx, rel.Tenant, rel.App)
	cmd := runtime.Command{Args: []string{"sh", "-c", "echo out; echo err >&2; printf last; exit 3"}, Name: "run", Attach: func(int) (runtime.Streams, error) {
		return runtime.Streams{Log: &runtime.LogAs{Process: "run", Index: 8}}, nil
	}}
	exit, err := r.Run(ctx, rel, cmd)
	if err != nil || exit.Code != 3 {
		t.Fatalf("exit %+v, %v; want 3", exit, err)
	}
	s.eventually(t, "the run's lines in the app's log", func() error {
		ch, err := d.Logs(ctx, rel.Tenant, rel.App, -1, false)
		if err != nil {
			return err
		}
		var got []string
		for l := range ch {
			if l.Process == "run" && l.Instance == 8 {
				got = append(got, l.Stream+": "+l.Text)
			}
		}
		if len(got) != 5 || got[0] != runtime.System+": Running sh -c echo out; echo err >&2; printf last; exit 3" ||
			!slices.Contains(got, runtime.Stdout+": out") || !slices.Contains(got, runtime.Stderr+": err") || !slices.Contains(got, runtime.Stdout+": last") ||
			got[4] != runtime.System+": Process exited with status 3" {
			return fmt.Errorf("the lines of run.8: %q", got)
		}
		return nil
	})
	s.waitStatus(t, d, rel.App, 1, 2)
}

// runOnTerminal: a command asked on a terminal has one, of the size
// asked, and a resize reaches it.
func (s *suite) runOnTerminal(t *testing.T, r runtime.Runner, rel runtime.Release) {
	ctx := s.ctx(t)
	var o oneOff
	cmd := o.command("run.7", "sh", "-c", "test -t 0 && test -t 1 && stty size")
	cmd.Terminal, cmd.Size = true, runtime.TerminalSize{Cols: 132, Rows: 50}
	exit, err := r.Run(ctx, rel, cmd)
	if err != nil || exit.Code != 0 || !strings.Contains(o.stdout.String(), "50 132") {
		t.Errorf("on a terminal of 132x50: exit %+v, %v, output %q", exit, err, o.stdout.String())
	}

	in, typed := io.Pipe()
	defer typed.Close()
	shell := oneOff{stdin: in, resize: make(chan runtime.TerminalSize)}
	cmd = shell.command("run.8", "sh")
	cmd.Terminal, cmd.Size, cmd.Stdin = true, runtime.TerminalSize{Cols: 80, Rows: 24}, true
	done := make(chan runtime.Exit, 1)
	go func() {
		exit, err := r.Run(ctx, rel, cmd)
		if err != nil {
			t.Errorf("the shell: %v", err)
		}
		done <- exit
	}()
	s.eventually(t, "the shell to see its terminal resized", func() error {
		select {
		case shell.resize <- runtime.TerminalSize{Cols: 100, Rows: 40}:
		case <-ctx.Done():
			return ctx.Err()
		}
		if _, err := io.WriteString(typed, "stty size\n"); err != nil {
			return err
		}
		if !strings.Contains(shell.stdout.String(), "40 100") {
			return fmt.Errorf("output %q", shell.stdout.String())
		}
		return nil
	})
	if _, err := io.WriteString(typed, "exit 3\n"); err != nil {
		t.Fatal(err)
	}
	select {
	case exit := <-done:
		if exit.Code != 3 {
			t.Errorf("the shell exited %+v, want 3", exit)
		}
	case <-ctx.Done():
		t.Fatal("the shell did not exit")
	}
}
