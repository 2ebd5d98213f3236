// Command bex-kubebin builds the pinned kube-apiserver and etcd binaries,
// the Kubernetes components named with --components (kube-controller-manager,
// kube-scheduler) and the pinned tools named with --tools (pebble, caddy, …),
// into the user's cache directory (once per version) and prints their paths;
// all it does lives in bex.co/bex/cmd/bex-kubebin/app.
package main

import (
	"context"
	"os"
	"os/signal"

	"bex.co/bex/cmd/bex-kubebin/app"
	"bex.co/bex/cmd/internal/command"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := app.New(os.Stdout, os.Stderr).ExecuteContext(ctx)
	stop()
	os.Exit(command.Exit(os.Stderr, "bex-kubebin", err))
}
