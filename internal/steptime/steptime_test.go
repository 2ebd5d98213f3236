package steptime_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"bex.co/bex/internal/steptime"
)

func TestTimeline(t *testing.T) {
	steptime.Start(context.Background(), "nothing")() // no Timeline: no panic, nothing kept
	ctx, tl := steptime.New(context.Background())
	tl.Add("checkout", 45*time.Millisecond)
	tl.Add("app build", 1400*time.Millisecond)
	tl.Add("checkout", 5*time.Millisecond)
	var wg sync.WaitGroup
	for range 10 {
		wg.Add(1)
		go func() { defer wg.Done(); steptime.Start(ctx, "start")() }()
	}
	wg.Wait()
	steps := tl.Steps()
	if len(steps) != 3 || steps[0].Name != "checkout" || steps[1].Name != "app build" || steps[2].Name != "start" {
		t.Fatalf("steps %+v, want checkout, app build, start in that order", steps)
	}
	if got := steptime.Format(steps[:2]); got != "checkout 50ms, app build 1.40s" {
		t.Errorf("Format = %q", got)
	}
	for i := range 40 {
		tl.Add(string(rune('a'+i)), time.Millisecond)
	}
	if n := len(tl.Steps()); n != 32 {
		t.Errorf("%d steps kept, want the bound 32", n)
	}
}
