// Command bex-build-agent runs one build's steps in a Pod of the tenant's,
// at the builder's calls; all it does lives in bex.co/bex/builder/buildagent.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"
	"k8s.io/klog/v2/textlogger"

	"bex.co/bex/builder/buildagent"
)

func main() {
	var o buildagent.ServeOptions
	o.AddFlags(pflag.CommandLine)
	pflag.Parse()
	o.Complete()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := o.Validate()
	if err == nil {
		err = o.Run(ctx, textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(os.Stderr))))
	}
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bex-build-agent:", err)
		os.Exit(1)
	}
}
