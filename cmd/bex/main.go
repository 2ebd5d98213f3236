// Command bex is the platform's command line for tenants and operators; all
// it does lives in bex.co/bex/cmd/bex/app.
package main

import (
	"context"
	"os"
	"os/signal"

	"bex.co/bex/cmd/bex/app"
	"bex.co/bex/cmd/internal/command"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := app.NewCommand(app.IO{Out: os.Stdout, Err: os.Stderr, In: os.Stdin, Getenv: os.Getenv}).ExecuteContext(ctx)
	stop()
	os.Exit(command.Exit(os.Stderr, "bex", err))
}
