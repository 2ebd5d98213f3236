// Command bex-static serves a static site's directory on $PORT: the web
// process of apps the builder detects as static.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"

	"bex.co/bex/internal/staticserve"
)

func main() {
	var o staticserve.Options
	o.AddFlags(pflag.CommandLine)
	pflag.Parse()
	o.Complete()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := o.Validate()
	if err == nil {
		err = o.Run(ctx)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bex-static:", err)
		stop()
		os.Exit(1)
	}
}
