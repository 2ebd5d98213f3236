// Package builder groups what turns a tenant's git push into a running
// release: the git receiver (builder/gitserver) and what it asks of the
// platform (builder/gitaccess: tokens, SSH keys, Apps), the build of a
// commit into an OCI image with stack detection and image assembly
// (builder/build), the pipeline from push to release (builder/pipeline),
// and the rollout, rollback and keeping-running of releases
// (builder/release), which needs no builder. It holds no code of its own;
// the bex-git command (cmd/bex-git/app) serves the receiver in a cluster
// deployment.
//
// The packages below it own one step each. The pipeline joins them: it is
// the git receiver's Deployer, calls builder/build for each push of a
// deploy branch, records the build, and hands the image to its Releaser;
// the wiring (cmd/bex-git/app, cmd/bex-embedded/app) hands it to the
// receiver. Processes that never build (the controller manager, bex-web)
// hold a release.Releaser alone.
package builder
