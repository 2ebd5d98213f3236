// Package app is the command line of bex-kubebin: it builds the pinned
// control-plane binaries and tools (internal/kubebin) ahead of the tests
// and of embedded mode, with progress on the terminal, and prints where
// they are.
package app
