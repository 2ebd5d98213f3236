// Command bex-embedded runs the whole bex platform on this machine, in the
// foreground (make run).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"bex.co/bex/internal/embedded"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := embedded.NewCommand(os.Stdout).ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "bex-embedded:", err)
		os.Exit(1)
	}
}
