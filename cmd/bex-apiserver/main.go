package main

import (
	"os"

	genericapiserver "k8s.io/apiserver/pkg/server"

	"bex.co/bex/cmd/bex-apiserver/app"
	"bex.co/bex/cmd/internal/command"
)

func main() {
	err := app.Main(genericapiserver.SetupSignalContext(), os.Args[1:], os.Stdout)
	os.Exit(command.Exit(os.Stderr, "bex-apiserver", err))
}
