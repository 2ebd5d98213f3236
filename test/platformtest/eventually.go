package platformtest

import (
	"context"
	"testing"
	"time"
)

const (
	// firstPoll is the pause after Eventually's first try; it doubles
	// after each try up to maxPoll.
	firstPoll = 20 * time.Millisecond
	// maxPoll bounds the pause between two tries, so that a condition
	// that is costly (a process started, a connection made) and a long
	// wait do not load the machine.
	maxPoll = 200 * time.Millisecond
	// tryTimeout bounds the context of one try.
	tryTimeout = 10 * time.Second
)

// Eventually calls cond until it returns nil, and fails t with what and
// cond's last error when timeout passes first. cond says in its error why
// the condition does not hold yet. The pause between tries starts at 20 ms
// and doubles up to 200 ms.
//
// Each try gets its own context, which ends 10 s after the try began: not
// at timeout, so that a try still running at the deadline fails with its
// own error, not with the wait's; nor with the test's context, which has
// ended by the time t.Cleanup functions wait. cond runs on the calling
// goroutine, so it may call t.Fatal.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func(ctx context.Context) error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for pause := firstPoll; ; pause = min(2*pause, maxPoll) {
		err := try(cond)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s: %v", what, timeout, err)
		}
		time.Sleep(pause)
	}
}

// try runs cond once with a context of its own.
func try(cond func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), tryTimeout)
	defer cancel()
	return cond(ctx)
}
