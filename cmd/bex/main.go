// Command bex is the platform's command line for tenants and operators.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"

	"bex.co/bex/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := cli.NewCommand(cli.IO{Out: os.Stdout, Err: os.Stderr, In: os.Stdin, Getenv: os.Getenv}).ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "bex:", err)
		os.Exit(1)
	}
}
