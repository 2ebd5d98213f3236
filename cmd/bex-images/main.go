// Command bex-images builds the images the Helm chart deploy/chart/bex runs,
// from this checkout and without Docker, and pushes them to a registry; all
// it does lives in bex.co/bex/cmd/bex-images/app.
package main

import (
	"os"

	"bex.co/bex/cmd/bex-images/app"
	"bex.co/bex/cmd/internal/command"
)

func main() {
	ctx, stop := command.SignalContext()
	err := app.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(command.Exit(os.Stderr, "bex-images", err))
}
