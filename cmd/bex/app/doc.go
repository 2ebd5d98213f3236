// Package app is the bex command line, for tenants and operators: login,
// apps, builds and their logs, releases and rollback, env, runtime logs,
// instances (ps), open, SSH keys, custom domains (routes), and the
// operators' admin and upgrade commands. It calls the platform API through web/api/apiclient, except
// `bex upgrade verify`, which probes the apiservers of a control plane
// directly with a kubeconfig.
//
// Each subcommand has its own file. NewCommand puts every dependency in
// place before any RunE runs: the output writers, the configuration
// (os.UserConfigDir()/bex/config.json, or BEX_API and BEX_TOKEN from the
// environment) and the API client. Commands render to an io.Writer, as a
// table or, with -o json, as JSON, so that tests can run them in process
// and read what they print. Run, which main calls, turns a command's error
// into its exit code and message (ErrorOf: usage 2, not found 3, conflict
// 4, auth 5, anything else 1), as text or as a JSON object.
package app
