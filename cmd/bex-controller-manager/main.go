// Command bex-controller-manager runs the platform's controllers (App,
// Route, FleetUpgrade) with leader election in a cluster deployment; all it
// does lives in bex.co/bex/cmd/bex-controller-manager/app.
package main

import (
	"os"

	"bex.co/bex/cmd/bex-controller-manager/app"
	"bex.co/bex/cmd/internal/command"
)

func main() {
	ctx, stop := command.SignalContext()
	err := app.Main(ctx, os.Args[1:], os.Stderr)
	stop()
	os.Exit(command.Exit(os.Stderr, "bex-controller-manager", err))
}
