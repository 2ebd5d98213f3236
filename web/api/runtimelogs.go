package api

import (
	"context"
	"errors"
	"strconv"

	"bex.co/bex/internal/runtime"
)

// RuntimeLogs serves the API's runtime logs from a runtime driver.
type RuntimeLogs struct{ Driver runtime.Driver }

var _ LogSource = RuntimeLogs{}

// Logs implements LogSource. An app the driver does not run (never
// deployed, or removed) has no lines, as LogSource says: the channel is
// closed, or with follow stays open until ctx ends.
func (l RuntimeLogs) Logs(ctx context.Context, tenant, app string, tail int, follow bool) (<-chan LogLine, error) {
	in, err := l.Driver.Logs(ctx, tenant, app, tail, follow)
	if errors.Is(err, runtime.ErrNotFound) {
		out := make(chan LogLine)
		go func() {
			if follow {
				<-ctx.Done()
			}
			close(out)
		}()
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	out := make(chan LogLine)
	go func() {
		defer close(out)
		for line := range in {
			select {
			case out <- LogLine{Time: line.Time, Process: line.Process, Instance: strconv.Itoa(line.Instance), Stream: line.Stream, Text: line.Text}:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}
