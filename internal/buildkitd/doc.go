// Package buildkitd starts BuildKit's daemon for the builder's Dockerfile
// builds: the buildkitd that internal/kubebin builds at its pinned version,
// as root, with the machine's runc (Debian's runc package) as its OCI worker
// and no containerd worker, its state and its unix socket (mode 0600, in a
// directory of mode 0700) under a directory the caller owns.
//
// Missing says what the machine lacks to run it (root, runc), so a caller
// can refuse Dockerfile builds with that reason instead of starting a
// daemon that cannot work. NewCgroup makes the cgroup one build's RUN steps
// run under (the Dockerfile frontend's cgroup-parent option), with the
// build's memory, CPU and pids limits. Start hands back the address builder/build's
// Options.BuildKitAddr takes; cmd/bex-embedded/app starts it for make run, and
// the builder's and the pipeline's tests start one each.
package buildkitd
