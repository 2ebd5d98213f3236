// Package app is the bex-git command: the git receiver
// (builder/gitserver) of a cluster deployment over smart HTTP and SSH, with
// the repositories on one volume, pushers authenticated by the store's API
// tokens and SSH keys, apps looked up as App objects in the management
// cluster, and each push of a deploy branch built and released in this
// process by the pipeline (builder/pipeline, which
// cmd/internal/workload puts together with builder/build, an optional
// buildkitd for Dockerfiles, and the releaser over the kube runtime
// driver). Repository size
// is bounded by the tenants' quotas, and an ops listener serves metrics and
// the readiness of the store and the management cluster.
//
// Options holds bex-git's flags (NewOptions, AddFlags, Complete, Validate,
// Run); Main is its command line, which cmd/bex-git calls.
//
// There is no separate builder service: builder/build is a library the
// pipeline calls, so builds run where the push is received and stream
// straight into the pusher's terminal. One bex-git owns a repository root:
// the one-writer-per-repository lock is in memory.
package app
