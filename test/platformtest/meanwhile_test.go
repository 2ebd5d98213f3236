package platformtest

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestMeanwhile(t *testing.T) {
	var n atomic.Int64
	stop := Meanwhile(context.Background(), 5*time.Millisecond, func(context.Context) error {
		if n.Add(1)%2 == 0 {
			return errors.New("even")
		}
		return nil
	})
	Eventually(t, 5*time.Second, "six calls", func(context.Context) error {
		if n.Load() < 6 {
			return errors.New("fewer than six calls")
		}
		return nil
	})
	calls, failures := stop()
	after := n.Load()
	time.Sleep(20 * time.Millisecond)
	if n.Load() != after {
		t.Fatalf("check called %d times after stop", n.Load()-after)
	}
	if calls < 6 || len(failures) != calls/2 {
		t.Fatalf("%d calls, %d failures (%v); want at least 6, half failed", calls, len(failures), failures)
	}
	if !strings.HasSuffix(failures[0], ": even") {
		t.Fatalf("failure %q does not end with the error", failures[0])
	}
}
