// Command bex-git is the git receiver of a cluster deployment: it takes
// pushes over smart HTTP and SSH and builds and releases them; all it does
// lives in bex.co/bex/builder/gitcmd.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"bex.co/bex/builder/gitcmd"
	"bex.co/bex/internal/clustermode"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := gitcmd.Main(ctx, os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "bex-git:", err)
		stop()
		os.Exit(clustermode.ExitCode(err))
	}
}
