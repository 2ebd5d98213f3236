// Command pushbench measures push-to-live on the embedded platform: seconds
// from git push to the first HTTP 200 of the new release through the edge,
// split into the app's own build steps (as the builder reports them) and
// the platform's overhead around them.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := newCommand().ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "pushbench:", err)
		os.Exit(1)
	}
}
