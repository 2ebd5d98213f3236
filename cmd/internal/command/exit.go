package command

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// UsageError is a command line the command refuses: a flag it does not
// know, a value it cannot parse, a required flag missing. Mains exit 2 on
// it, like Go's flag package, and 1 on every other error.
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// Usage wraps err as a UsageError; nil stays nil.
func Usage(err error) error {
	if err == nil {
		return nil
	}
	return &UsageError{Err: err}
}

// ExitStatus is the end of a command that ran another to its end (bex
// run): the process exits with Code, the other's status, and says nothing
// more, since the other said what it had to.
type ExitStatus struct{ Code int }

func (e *ExitStatus) Error() string { return fmt.Sprintf("exit status %d", e.Code) }

// ExitCode is the process exit code for a command's error: 0 for nil, 2 for
// a UsageError, an ExitStatus's Code, 1 otherwise.
func ExitCode(err error) int {
	var ue *UsageError
	var es *ExitStatus
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ue):
		return 2
	case errors.As(err, &es):
		return es.Code
	}
	return 1
}

// Exit returns the exit code for err (ExitCode), having written a non-nil
// err but an ExitStatus to w as "name: err".
func Exit(w io.Writer, name string, err error) int {
	var es *ExitStatus
	if err != nil && !errors.As(err, &es) {
		fmt.Fprintf(w, "%s: %v\n", name, err)
	}
	return ExitCode(err)
}

// SignalContext returns a context that ends on SIGINT or SIGTERM, and the
// function that stops listening for them.
func SignalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}
