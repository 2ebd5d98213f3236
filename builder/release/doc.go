// Package release rolls an app's releases out and back, and keeps them
// running: it is the API's Releaser and the App controller's Releases.
// It needs the runtime driver and the store, never the builder; the
// pipeline (builder/pipeline) builds a push and hands the image here.
//
// Before a rollout it unpacks the image under ReleasesDir: an image the
// builder laid out under /app becomes runtime.Release.Dir with its
// processes; a Dockerfile image becomes Release.RootFS, its whole root
// filesystem, with its WorkingDir, its own environment, and (without a
// Procfile) its ENTRYPOINT and CMD as the web process's Args. Only a
// sandboxing driver runs the latter. Rollback rolls an earlier release's
// image and config out as a new release. After each release goes live,
// Prune marks the releases past the retention pruned and deletes their
// artifacts, retrying at the next prune what failed. ReleaseConfig rolls
// the current release's image out as a new release with the App's new
// environment (a config release, described by the names that changed);
// Restart hands the runtime the current release again with a new
// runtime.Process.Restart on the processes to restart, reusing the
// release's unpacked directory, and records no release; Scale hands it
// the current release again with the new instance counts (and plan),
// then stores them in the App's spec, and records no release. A rollout of
// either that fails is a runtime.NotDeployedError: what served keeps
// serving.
//
// A release whose image has a release process (a Procfile's "release:"
// line, such as migrations) runs it once in a fresh instance of the new
// release (runtime.Runner), after the image is unpacked and before the
// runtime rolls the release out; a push's, a rollback's and a config
// release's rollout alike, never EnsureRunning's. It never runs as
// instances. One that exits non-zero or outlasts ReleasePhaseTimeout
// stops the rollout: the error quotes its exit status and last lines.
// Run runs a one-off command in a fresh instance of the current release.
//
// EnsureRunning brings the runtime back to the App's current release after a
// restart; the App controller calls it, level-based, and it reads the App
// again under the app's lock rather than trust the caller's copy. Work on one
// app is serialised (Lock), within the process and, through the store's app
// lock (store.LockApp), across every process on the same database: a
// rollback in the web API waits for a push's deploy in the git receiver.
// Different apps proceed in parallel.
package release
