package runtime

import (
	"context"
	"errors"
	"io"
)

// ErrRunNotSupported is wrapped by Runner.Run, and by whatever stands for
// a driver that is no Runner, when the runtime the app runs on cannot run
// a one-off command (a workload cluster's Pods, today).
var ErrRunNotSupported = errors.New("one-off commands do not run on this runtime")

// ErrNoInput is wrapped by Runner.Run, before cmd.Attach and before
// anything runs, when cmd asks for input (Command.Stdin) or a terminal on
// a runtime whose instances take neither (a workload cluster's Pods: the
// platform's node agent serves no attach).
var ErrNoInput = errors.New("one-off commands on this runtime take no input and have no terminal")

// TerminalSize is the size of a terminal in characters.
type TerminalSize struct {
	Cols, Rows uint16
}

// Streams are a one-off command's standard streams. A nil Stdin is an
// empty one: the command reads end-of-file at once. With a terminal,
// Stdout receives everything the command writes and Stderr nothing, and
// Resize, when set, gives the terminal's new sizes until it is closed.
type Streams struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	Resize         <-chan TerminalSize
	// Log, when set, sends the command's output to the app's log too,
	// what Driver.Logs reads, as the lines of instance Log ("run.3"),
	// with the platform's lines saying that it started and how it ended:
	// a detached run's, whose caller reads no stream. A driver whose
	// Logs shows no one-off command ignores it.
	Log *LogAs
	// RunID, when set, is the ID the caller records the run under. A
	// driver whose instances can outlive the caller (RunReaper) marks the
	// run's instance with it, so that EndRun finds it; others ignore it.
	RunID string
}

// LogAs names the instance a one-off command's lines are of in its app's
// log: {"run", 3} is run.3.
type LogAs struct {
	Process string
	Index   int
}

// Command is a one-off command run in a fresh instance of a release: what
// `bex run` and the release phase run.
type Command struct {
	// Args is the command line, run as it is with no shell in between;
	// Args[0] is looked up on the release's PATH.
	Args []string
	// Name is the instance's name ("run.3", "release"): its hostname and
	// what its lines in the driver's own log say.
	Name string
	// Terminal runs the command on a pseudo-terminal of Size, as an
	// interactive shell needs; a driver that has none runs it without one,
	// and one whose instances take no input refuses it (ErrNoInput).
	Terminal bool
	Size     TerminalSize
	// Stdin says the caller has input for the command in Streams.Stdin.
	// A driver whose instances take no input refuses the command
	// (ErrNoInput); without Stdin such a driver leaves Streams.Stdin
	// unread and the command reads end-of-file.
	Stdin bool
	// Attach is called once the instance is ready and before the command
	// starts, with the release's number, and gives the streams. An error
	// stops the run before anything ran, and Run returns it as it is. A
	// driver whose instances take long to start (a cluster's Pods) calls
	// it before it makes the instance, so that the caller's checks come
	// first; an error Run returns after Attach is then why the instance
	// did not start.
	Attach func(release int) (Streams, error)
}

// Exit is how a one-off command ended.
type Exit struct {
	// Code is the command's exit status; 128+N when signal N ended it.
	Code int
	// Reason says why the command was ended when it did not end on its
	// own: the cause of the context that ended it ("timed out after 1h0m0s",
	// "the client went away"), or that it went past its memory limit.
	Reason string
}

// Runner is implemented by a driver that runs one-off commands.
type Runner interface {
	// Run runs cmd in a fresh instance of rel, with the release's image,
	// environment (rel.Env over rel.ImageEnv, no PORT), sandbox and
	// resources, as a web instance would have, but without a port and
	// without traffic; nothing else of the app changes. It returns once
	// the command and everything it started have ended and the instance
	// is removed. When ctx ends first, the command is stopped (SIGTERM,
	// then SIGKILL after a short grace period) and Exit.Reason is
	// context.Cause(ctx). An error means the command did not run: an
	// invalid rel, cmd.Attach's error, an instance that could not be made.
	// Runs are independent of Deploy: neither waits for the other.
	Run(ctx context.Context, rel Release, cmd Command) (Exit, error)
}

// RunReaper is implemented by a Runner whose runs' instances can outlive
// the Run call that made them and the process that called it (a workload
// cluster's Pods run on when the API server that ran them dies). Its
// methods are safe for concurrent use and stop when ctx ends.
type RunReaper interface {
	// EndRun stops the instance of the tenant's app's run that its caller
	// marked with runID (Streams.RunID), when one still runs, as Run stops
	// it when its context ends: SIGTERM, then SIGKILL after the grace
	// period, and a run whose output goes to the app's log (Streams.Log)
	// keeps its lines there. It is for a run whose Run is gone (its
	// server died: the run is lost). It asks for the stop and returns,
	// without waiting for the instance's end. No such instance (never
	// made, ended already, on another cluster) is nil, and so is a second
	// call; an error means the instance may run on and the call is to be
	// made again.
	EndRun(ctx context.Context, tenant, app, runID string) error
	// SweepRuns deletes what the driver keeps of runs that ended, once
	// kept past its retention (the instance of a run whose output went
	// to the app's log, kept for those lines), and the instances of runs
	// whose Run is gone that are past their time limit, in every app at
	// once, without waiting for the app's next run. Each call does a
	// bounded amount of work; what is left waits for the next one.
	SweepRuns(ctx context.Context) error
}
