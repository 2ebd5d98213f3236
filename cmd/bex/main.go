// Command bex is the platform's command line for tenants and operators; all
// it does lives in bex.co/bex/cmd/bex/app.
package main

import (
	"context"
	"os"
	"os/signal"

	"bex.co/bex/cmd/bex/app"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := app.Run(ctx, app.IO{Out: os.Stdout, Err: os.Stderr, In: os.Stdin, Getenv: os.Getenv}, os.Args[1:])
	stop()
	os.Exit(code)
}
