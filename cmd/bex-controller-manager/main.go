// Command bex-controller-manager runs the platform's controllers (App,
// Route, FleetUpgrade) with leader election in a cluster deployment; all it
// does lives in bex.co/bex/controllers/managercmd.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"bex.co/bex/controllers/managercmd"
	"bex.co/bex/internal/clustermode"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := managercmd.Main(ctx, os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "bex-controller-manager:", err)
		stop()
		os.Exit(clustermode.ExitCode(err))
	}
}
