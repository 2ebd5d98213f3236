// Package pipeline turns a push into a running release: it is the git
// receiver's Deployer and the API's Releaser.
//
// For a push it records a build in the store, runs the builder with the
// build's output going both to the pusher (through the git side-band) and to
// the store, rolls the image out with the runtime driver, records the
// release — numbered, immutable — only once the runtime reports it healthy,
// and writes the App's status.currentRelease and status.url. A failed build
// or rollout changes nothing that is running. Rollback rolls an earlier
// release's image and config out as a new release.
//
// Before a rollout it unpacks the image under ReleasesDir: an image the
// builder laid out under /app becomes Release.Dir with its processes; a
// Dockerfile image becomes Release.RootFS, its whole root filesystem, with
// its WorkingDir, its own environment, and (without a Procfile) its
// ENTRYPOINT and CMD as the web process's Args. Only a sandboxing driver
// runs the latter.
//
// EnsureRunning brings the runtime back to the App's current release after a
// restart; the App controller calls it, level-based, and it reads the App
// again under the app's lock rather than trust the caller's copy. Work on one
// app is serialised, within the process and, through the store's app lock
// (store.LockApp), across every process on the same database: a rollback in
// the web API waits for a push's deploy in the git receiver. Different apps
// proceed in parallel.
package pipeline
