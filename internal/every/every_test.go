package every_test

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"bex.co/bex/internal/every"
)

// TestRunOutlivesPanics: a step that panics is run again, up to the
// restarts allowed; a step that says it is done ends the loop.
func TestRunOutlivesPanics(t *testing.T) {
	calls := 0
	panicky := func() bool {
		calls++
		panic("step failed")
	}
	if every.Run(t.Context(), logr.Discard(), "step", time.Millisecond, 2, panicky) {
		t.Error("a step that always panics: Run says it finished")
	}
	if calls != 3 {
		t.Errorf("a step that always panics ran %d times with 2 restarts, want 3", calls)
	}

	calls = 0
	once := func() bool {
		calls++
		if calls == 1 {
			panic("first call")
		}
		return calls < 3
	}
	if !every.Run(t.Context(), logr.Discard(), "step", time.Millisecond, 2, once) || calls != 3 {
		t.Errorf("a step that panics once and is done at its third call: %d calls", calls)
	}

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if !every.Run(ctx, logr.Discard(), "step", time.Hour, 0, func() bool { t.Error("step ran after its context ended"); return true }) {
		t.Error("a loop whose context ended: Run says it gave up")
	}
}
