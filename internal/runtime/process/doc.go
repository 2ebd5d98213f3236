// Package process is the runtime driver of embedded mode: it runs each
// instance of a release as an OS process in its own process group on this
// machine, with PORT set for web instances to a port free on every address, taken
// from a range outside the kernel's ephemeral ports.
//
// It owns the processes it starts (supervision, health checks, crash restart
// with exponential backoff, stdout/stderr capture into a per-app ring buffer
// and file) and hands the edge its routing table through Upstreams: the
// addresses of the healthy web instances of each app's current release,
// switched atomically at cut-over. A Deploy of the release that runs, with
// nothing changed but some processes' Restart, starts new instances of
// those processes only, cuts over to them once healthy and stops the old
// ones; the other instances keep running (a restart). One that changes
// some processes' Replicas scales them: it starts only the instances
// missing, or takes the last ones out of the routing table, drains and
// stops them, and replaces none (a scale). The same release with no new
// Restart and the same Replicas changes nothing.
//
// An instance that keeps crashing is restarted after 1s, 2s, 4s... up to
// BackoffMax, each delay in a "restarting in" line of the app's log; from
// its second crash in a row until one of its processes has run a minute,
// Status reports the app not ready and says how often it crashed, when it
// restarts and how it last exited.
package process
