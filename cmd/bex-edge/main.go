// Command bex-edge is the platform's edge router: HTTPS with certificates on
// demand for the hostnames Routes and apps claim, in front of the apps; all
// it does lives in bex.co/bex/cmd/bex-edge/app.
package main

import (
	"os"

	"bex.co/bex/cmd/bex-edge/app"
	"bex.co/bex/cmd/internal/command"
)

func main() {
	ctx, stop := command.SignalContext()
	err := app.Main(ctx, os.Args[1:], os.Stderr)
	stop()
	os.Exit(command.Exit(os.Stderr, "bex-edge", err))
}
