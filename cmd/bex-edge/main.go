// Command bex-edge is the platform's edge router: HTTPS with certificates on
// demand for the hostnames Routes and apps claim, in front of the apps.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"bex.co/bex/internal/edge/edgecmd"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := edgecmd.Main(ctx, os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "bex-edge:", err)
		os.Exit(1)
	}
}
