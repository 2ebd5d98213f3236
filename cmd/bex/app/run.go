package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"bex.co/bex/cmd/internal/command"
	"bex.co/bex/web/api/apiclient"
)

func newRunCommand(st *state) *cobra.Command {
	var interactive, noTTY, detach bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "run APP [flags] -- COMMAND [ARG...]",
		Short: "Run a one-off command in a fresh instance of the app's current release (its image, env, sandbox), streaming its output; bex exits with its status",
		Long: "Run a one-off command in a fresh instance of the app's current release: the same image, environment (secrets\n" +
			"included), sandbox and plan limits as a web instance, but no port and no traffic. Its output comes back as it\n" +
			"runs and bex exits with its exit status. The command runs as it is, with no shell: use sh -c '...' for one.\n\n" +
			"When stdin and stdout are a terminal the command runs on one, with stdin attached (bex run APP -- bash);\n" +
			"otherwise stdin is closed, or forwarded with -i. Ending bex (Ctrl-C without a terminal) kills the command.\n" +
			"A runtime that gives one-off commands no terminal or input (their output and status still come back)\n" +
			"refuses -i, and on a terminal bex says so and runs the command without one.\n\n" +
			"With --detach (-d) the command runs in the background and bex exits once it runs: its output goes to the\n" +
			"app's logs as run.N's lines (bex logs APP -f), how it ended to bex runs APP; it takes no input (no -i).\n\n" +
			"Examples:\n  bex run shop -- sh -c 'echo $DATABASE_URL'\n  bex run shop -- bash\n  bex run -i shop -- psql < dump.sql\n" +
			"  bex run -d shop -- rake db:migrate",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			app, argv, err := runArgs(args, cmd.ArgsLenAtDash())
			if err != nil {
				return command.Usage(err)
			}
			if timeout < 0 || timeout > apiclient.MaxRunTimeout || timeout%time.Second != 0 {
				return command.Usage(fmt.Errorf("--timeout %s: whole seconds, at most %s", timeout, apiclient.MaxRunTimeout))
			}
			if detach && interactive {
				return command.Usage(errors.New("--detach with -i: a detached run reads no input; pipe it to an attached run (bex run -i) instead"))
			}
			c, err := st.needClient()
			if err != nil {
				return err
			}
			req := apiclient.RunRequest{Command: argv, TimeoutSeconds: int(timeout / time.Second)}
			if detach {
				return st.runDetached(cmd.Context(), c, app, req)
			}
			streams := apiclient.RunStreams{Stdout: st.io.Out, Stderr: st.io.Err}
			if interactive {
				streams.Stdin = st.io.In
			}
			restore := func() {}
			if tty, ok := st.terminal(); ok && !noTTY {
				if restore, err = tty.attach(cmd.Context(), &req, &streams); err != nil {
					return err
				}
			}
			exit, err := c.Run(cmd.Context(), app, req, streams)
			restore()
			if req.Terminal && !interactive && takesNoInput(err) {
				// A terminal bex chose, not one asked for: the output and
				// exit status are worth having without it.
				fmt.Fprintf(st.io.Err, "bex: %s runs where a one-off command has no terminal and reads no input: running it without\n", app)
				req.Terminal, req.Cols, req.Rows = false, 0, 0
				streams.Stdin, streams.Resize = nil, nil
				exit, err = c.Run(cmd.Context(), app, req, streams)
			}
			if errors.Is(err, context.Canceled) {
				return errors.New("interrupted: the command was killed")
			}
			if err != nil {
				return explain(err)
			}
			if exit.Reason != "" {
				fmt.Fprintf(st.io.Err, "bex: run.%d of %s: %s (exit status %d)\n", exit.Run, app, exit.Reason, exit.ExitCode)
			}
			if exit.ExitCode != 0 {
				return &command.ExitStatus{Code: exit.ExitCode}
			}
			return nil
		},
	}
	cmd.Flags().BoolVarP(&interactive, "interactive", "i", false, "Forward stdin to the command when it is not a terminal (a terminal always is)")
	cmd.Flags().BoolVar(&noTTY, "no-tty", false, "Do not run the command on a terminal even when stdin and stdout are one")
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "Stop the command after this long (default 1h, at most 24h)")
	cmd.Flags().BoolVarP(&detach, "detach", "d", false, "Run the command in the background, its output going to the app's logs, and exit once it runs")
	return cmd
}

// runDetached runs req in the background and says so as Heroku's
// run:detached does, or prints the run with -o json.
func (st *state) runDetached(ctx context.Context, c *apiclient.Client, app string, req apiclient.RunRequest) error {
	run, err := c.RunDetached(ctx, app, req)
	if err != nil {
		return explain(err)
	}
	return st.render(run, func(w io.Writer) error {
		_, err := fmt.Fprintf(w, "Running %s on %s... up, run.%d\nUse bex logs %s -f to see its output, bex runs %s how it ended.\n",
			commandLine(req.Command, 60), app, run.Number, app, app)
		return err
	})
}

// takesNoInput reports whether err is the API's refusal of input for an
// app whose runs take none.
func takesNoInput(err error) bool {
	var apiErr *apiclient.Error
	return errors.As(err, &apiErr) && apiErr.Status == http.StatusUnprocessableEntity && apiErr.Field == "stdin"
}

// runArgs splits bex run's arguments into the app and the command: APP --
// COMMAND..., or APP COMMAND... when the command has no flags bex would
// take for its own.
func runArgs(args []string, dash int) (string, []string, error) {
	switch {
	case dash == 1 && len(args) > 1, dash < 0 && len(args) > 1:
		return args[0], args[1:], nil
	case dash > 1:
		return "", nil, fmt.Errorf("%q before --: give the app alone before --, as in bex run APP -- COMMAND", args[1:dash])
	}
	return "", nil, errors.New("no command to run: bex run APP -- COMMAND [ARG...]")
}

// terminal is bex's own terminal: stdin and stdout, both terminals.
type terminal struct{ in, out *os.File }

// terminal returns bex's terminal when stdin and stdout are one.
func (st *state) terminal() (terminal, bool) {
	in, ok1 := st.io.In.(*os.File)
	out, ok2 := st.io.Out.(*os.File)
	if !ok1 || !ok2 || !term.IsTerminal(int(in.Fd())) || !term.IsTerminal(int(out.Fd())) {
		return terminal{}, false
	}
	return terminal{in, out}, true
}

// attach runs the command on a terminal of t's size, with t's input
// forwarded as typed (raw: the command's terminal does the echo and line
// editing, and Ctrl-C goes to the command) and its size changes; restore
// gives t its mode back.
func (t terminal) attach(ctx context.Context, req *apiclient.RunRequest, streams *apiclient.RunStreams) (restore func(), err error) {
	req.Terminal = true
	if cols, rows, err := term.GetSize(int(t.out.Fd())); err == nil {
		req.Cols, req.Rows = uint16(cols), uint16(rows)
	}
	state, err := term.MakeRaw(int(t.in.Fd()))
	if err != nil {
		return nil, fmt.Errorf("putting the terminal in raw mode: %w", err)
	}
	winch := make(chan os.Signal, 1)
	signal.Notify(winch, syscall.SIGWINCH)
	sizes := make(chan apiclient.TerminalSize, 1)
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		defer close(sizes)
		for {
			select {
			case <-ctx.Done():
				return
			case <-winch:
				if cols, rows, err := term.GetSize(int(t.out.Fd())); err == nil {
					select {
					case sizes <- apiclient.TerminalSize{Cols: uint16(cols), Rows: uint16(rows)}:
					case <-ctx.Done():
						return
					}
				}
			}
		}
	}()
	streams.Stdin, streams.Resize = t.in, sizes
	return func() {
		cancel()
		signal.Stop(winch)
		_ = term.Restore(int(t.in.Fd()), state)
	}, nil
}
