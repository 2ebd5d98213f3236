// Command bex-web serves the platform's JSON API (and, later, the
// dashboard) in a cluster deployment; all it does lives in
// bex.co/bex/web/webcmd.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"bex.co/bex/internal/clustermode"
	"bex.co/bex/web/webcmd"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := webcmd.Main(ctx, os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "bex-web:", err)
		stop()
		os.Exit(clustermode.ExitCode(err))
	}
}
