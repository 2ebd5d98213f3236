// Command bex-node is the node agent of a local workload cluster's worker
// machines: a small kubelet for bex's own workloads; all it does lives in
// bex.co/bex/cmd/bex-node/app and bex.co/bex/node.
package main

import (
	"os"

	"bex.co/bex/cmd/bex-node/app"
	"bex.co/bex/cmd/internal/command"
)

func main() {
	ctx, stop := command.SignalContext()
	err := app.Main(ctx, os.Args[1:], os.Stderr)
	stop()
	os.Exit(command.Exit(os.Stderr, "bex-node", err))
}
