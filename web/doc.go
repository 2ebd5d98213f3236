// Package web holds bex's HTTP surfaces, served by bex-web: the platform
// JSON API for the CLI and scripts (web/api, with its Go client in
// web/api/apiclient), and the tenant dashboard and operator console as they
// are built. This package itself has no code; each surface is its own
// package and takes its dependencies (the store, a cluster client, the
// runtime) through its constructor's options.
package web
