// Command bex-web serves the platform's JSON API and the dashboard in a
// cluster deployment; all it does lives in bex.co/bex/cmd/bex-web/app.
package main

import (
	"os"

	"bex.co/bex/cmd/bex-web/app"
	"bex.co/bex/cmd/internal/command"
)

func main() {
	ctx, stop := command.SignalContext()
	err := app.Main(ctx, os.Args[1:], os.Stderr)
	stop()
	os.Exit(command.Exit(os.Stderr, "bex-web", err))
}
