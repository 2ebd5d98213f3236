package api

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"bex.co/bex/internal/runtime"
	"bex.co/bex/internal/store"
)

// TestRunEndOf: how a run ended, for its app.run.end entry, comes from the
// cause of its context only when the runtime gave that cause as the
// reason; a reason of the runtime's own is the platform killing it.
func TestRunEndOf(t *testing.T) {
	timeout := runTimeout{after: time.Second}
	for _, tc := range []struct {
		name  string
		exit  runtime.Exit
		err   error
		cause error
		want  store.RunEnd
	}{
		{"exit 0", runtime.Exit{}, nil, nil, store.RunExited},
		{"exit 3", runtime.Exit{Code: 3}, nil, nil, store.RunExited},
		{"exited before its client went", runtime.Exit{Code: 3}, nil, errClientGone, store.RunExited},
		{"not started", runtime.Exit{}, errors.New("no sandbox"), nil, store.RunNotStarted},
		{"stopped", runtime.Exit{Code: 143, Reason: "stopped by a@b.c"}, nil, stopCause("a@b.c"), store.RunStopped},
		{"timed out", runtime.Exit{Code: 143, Reason: "timed out after 1s"}, nil, timeout, store.RunTimedOut},
		{"timed out, wrapped", runtime.Exit{Code: 143, Reason: "x: timed out after 1s"}, nil, fmt.Errorf("x: %w", timeout), store.RunTimedOut},
		{"client gone", runtime.Exit{Code: 143, Reason: errClientGone.Error()}, nil, errClientGone, store.RunDisconnected},
		{"app removed", runtime.Exit{Code: 143, Reason: "the app was removed"}, nil, nil, store.RunKilled},
		{"memory limit while a stop was asked", runtime.Exit{Code: 137, Reason: "killed for going past its memory limit (512 MiB)"}, nil, stopCause("a@b.c"), store.RunKilled},
		{"marked lost", runtime.Exit{Code: 143, Reason: lostCause("gone").Error()}, nil, lostCause("gone"), store.RunKilled},
	} {
		if got := runEndOf(tc.exit, tc.err, tc.cause); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}
