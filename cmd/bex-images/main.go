// Command bex-images builds the images the Helm chart deploy/chart/bex runs,
// from this checkout and without Docker, and pushes them to a registry; all
// it does lives in bex.co/bex/internal/images/imagescmd.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"bex.co/bex/internal/images/imagescmd"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := imagescmd.Main(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "bex-images:", err)
		os.Exit(1)
	}
}
