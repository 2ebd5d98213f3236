// Command bex-kubebin builds the pinned kube-apiserver and etcd binaries, and
// the pinned tools named with --tools (pebble, pebble-challtestsrv, caddy),
// into the user's cache directory (once per version) and prints their paths.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"

	"bex.co/bex/internal/kubebin/kubebincmd"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := kubebincmd.New(os.Stdout, os.Stderr).ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "bex-kubebin:", err)
		os.Exit(1)
	}
}
