package every

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
)

// Run calls step every period until ctx ends or step returns false, and
// reports true then. A panic in step is logged ("<what> panicked") and
// the loop starts again with a new ticker, at most restarts times; after
// the last it reports false, and the caller says what giving up means.
func Run(ctx context.Context, log logr.Logger, what string, period time.Duration, restarts int, step func() (more bool)) bool {
	for range restarts + 1 {
		if loop(ctx, log, what, period, step) {
			return true
		}
	}
	return false
}

// loop is one run of the loop; it returns false after a panic.
func loop(ctx context.Context, log logr.Logger, what string, period time.Duration, step func() bool) (finished bool) {
	defer func() {
		if r := recover(); r != nil {
			log.Error(fmt.Errorf("panic: %v", r), what+" panicked")
			finished = false
		}
	}()
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return true
		case <-t.C:
		}
		if !step() {
			return true
		}
	}
}
