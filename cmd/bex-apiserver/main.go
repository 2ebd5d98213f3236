package main

import (
	"fmt"
	"os"

	genericapiserver "k8s.io/apiserver/pkg/server"

	"bex.co/bex/apiserver"
)

func main() {
	if err := apiserver.Main(genericapiserver.SetupSignalContext(), os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "bex-apiserver:", err)
		os.Exit(1)
	}
}
