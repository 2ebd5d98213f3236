// Package command is what the bex binaries share around their wiring: one
// exit-code convention (Exit: 0, 2 for a refused command line, 1 for any
// other failure), the parsing of a flag set with its Complete and Validate
// steps (Parse), the logger a command writes (NewLogger), and the flags of
// the commands that work on the management cluster and the platform's store
// (PlatformOptions: --kubeconfig and --database-url), opening both (Open),
// and the ops listener of the cluster install's commands (OpsHandler:
// /metrics, /healthz, /readyz; Serve with a graceful shutdown).
//
// Each binary's own flags and wiring live beside its main, in
// cmd/<binary>/app; a main only makes the signal context, calls its app's
// Main and exits with Exit's code.
package command
