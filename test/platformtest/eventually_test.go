package platformtest

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// fatalRecorder is a testing.TB whose Fatalf records the message and ends
// the calling goroutine, as t.Fatalf does.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (f *fatalRecorder) Helper() {}

func (f *fatalRecorder) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// eventually runs Eventually on a fatalRecorder and returns what it failed
// with, "" when it returned.
func eventually(t *testing.T, timeout time.Duration, cond func(ctx context.Context) error) string {
	rec := &fatalRecorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Eventually(rec, timeout, "the thing", cond)
	}()
	<-done
	return rec.msg
}

func TestEventuallyReturnsOnceCondHolds(t *testing.T) {
	tries := 0
	msg := eventually(t, time.Minute, func(context.Context) error {
		tries++
		if tries < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	if msg != "" || tries != 3 {
		t.Fatalf("Eventually failed with %q after %d tries, want success on the third", msg, tries)
	}
}

func TestEventuallyFailsWithWhatAndTheLastError(t *testing.T) {
	tries := 0
	msg := eventually(t, 100*time.Millisecond, func(context.Context) error {
		tries++
		return fmt.Errorf("try %d", tries)
	})
	if want := fmt.Sprintf("the thing: not within 100ms: try %d", tries); msg != want || tries < 2 {
		t.Fatalf("Eventually failed with %q after %d tries, want %q after several", msg, tries, want)
	}
}

// A try's context is its own: it outlives the wait's timeout, and the
// test's context, so that waits in t.Cleanup work.
func TestEventuallyGivesEachTryItsOwnContext(t *testing.T) {
	check := func(t *testing.T) {
		msg := eventually(t, 0, func(ctx context.Context) error {
			if err := ctx.Err(); err != nil {
				return err
			}
			if d, ok := ctx.Deadline(); !ok || time.Until(d) < 5*time.Second {
				return fmt.Errorf("deadline %v, %t", d, ok)
			}
			return nil
		})
		if msg != "" {
			t.Errorf("Eventually: %s", msg)
		}
	}
	check(t)
	t.Run("cleanup", func(t *testing.T) {
		t.Cleanup(func() { check(t) })
	})
}

func TestSyncBufferKeepsConcurrentWrites(t *testing.T) {
	var b SyncBuffer
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 100 {
				fmt.Fprintf(&b, "writer %d line %d\n", w, i)
			}
		})
	}
	wg.Wait()
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != 800 {
		t.Fatalf("%d lines, want 800", len(lines))
	}
	for _, l := range lines {
		if !strings.HasPrefix(l, "writer ") {
			t.Fatalf("line %q: writes interleaved", l)
		}
	}
}

func TestHasConditionSaysWhatIsThere(t *testing.T) {
	conds := []metav1.Condition{{Type: "Ready", Status: metav1.ConditionFalse, Reason: "Crashing", Message: "exited 1"}}
	for _, c := range []struct {
		typ, reason string
		status      metav1.ConditionStatus
		want        string
	}{
		{typ: "Ready", status: metav1.ConditionFalse, reason: "Crashing"},
		{typ: "Ready", status: metav1.ConditionFalse},
		{typ: "Ready", reason: "Crashing"},
		{typ: "Ready", status: metav1.ConditionTrue, want: "Ready is False (Crashing): exited 1"},
		{typ: "Ready", reason: "Healthy", want: "Ready is False (Crashing): exited 1"},
		{typ: "Built", want: "no Built condition"},
	} {
		err := HasCondition(conds, c.typ, c.status, c.reason)
		if got := fmt.Sprint(err); (c.want == "" && err != nil) || (c.want != "" && got != c.want) {
			t.Errorf("HasCondition(%s, %q, %q) = %v, want %q", c.typ, c.status, c.reason, err, c.want)
		}
	}
}

func TestLastLine(t *testing.T) {
	for out, want := range map[string]string{"": "", "one": "one", "one\ntwo\n": "two", "one\ntwo\n\n": "two"} {
		if got := LastLine(out); got != want {
			t.Errorf("LastLine(%q) = %q, want %q", out, got, want)
		}
	}
}
