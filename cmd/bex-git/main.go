// Command bex-git is the git receiver of a cluster deployment: it takes
// pushes over smart HTTP and SSH and builds and releases them; all it does
// lives in bex.co/bex/cmd/bex-git/app.
package main

import (
	"os"

	"bex.co/bex/cmd/bex-git/app"
	"bex.co/bex/cmd/internal/command"
)

func main() {
	ctx, stop := command.SignalContext()
	err := app.Main(ctx, os.Args[1:], os.Stderr)
	stop()
	os.Exit(command.Exit(os.Stderr, "bex-git", err))
}
