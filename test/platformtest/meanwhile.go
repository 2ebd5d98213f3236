package platformtest

import (
	"context"
	"time"
)

// Meanwhile calls check every interval, on a goroutine of its own, until
// the returned function is called, which waits for the last call to end
// and returns how many calls were made and the failures check returned
// (each prefixed with the time of its call). A call whose context ended
// (the stop) is not counted. It measures what a test wants to hold all
// along while something else happens: an app answering through a move, a
// ready Pod through a scale-down.
func Meanwhile(ctx context.Context, interval time.Duration, check func(ctx context.Context) error) (stop func() (calls int, failures []string)) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	var calls int
	var failures []string
	go func() {
		defer close(done)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			at := time.Now()
			err := check(ctx)
			if ctx.Err() != nil {
				return
			}
			calls++
			if err != nil {
				failures = append(failures, at.Format("15:04:05.000")+": "+err.Error())
			}
		}
	}()
	return func() (int, []string) {
		cancel()
		<-done
		return calls, failures
	}
}
