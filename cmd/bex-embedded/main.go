// Command bex-embedded runs the whole bex platform on this machine, in the
// foreground (make run); all it does lives in
// bex.co/bex/cmd/bex-embedded/app.
package main

import (
	"os"

	"bex.co/bex/cmd/bex-embedded/app"
	"bex.co/bex/cmd/internal/command"
)

func main() {
	ctx, stop := command.SignalContext()
	err := app.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(command.Exit(os.Stderr, "bex-embedded", err))
}
