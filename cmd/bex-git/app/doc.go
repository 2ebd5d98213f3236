// Package app is the bex-git command: the git receiver
// (builder/gitserver) of a cluster deployment over smart HTTP and SSH, with
// the repositories on one volume, pushers authenticated by the store's API
// tokens and SSH keys, apps looked up as App objects in the management
// cluster, and each push of a deploy branch built and released in this
// process by the pipeline of internal/clustermode (builder/build, with an
// optional buildkitd for Dockerfiles, then the kube runtime driver).
//
// There is no separate builder service: builder/build is a library the
// pipeline calls, so builds run where the push is received and stream
// straight into the pusher's terminal. One bex-git owns a repository root:
// the one-writer-per-repository lock is in memory.
package app
