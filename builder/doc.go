// Package builder groups what turns a tenant's git push into an image: the
// git receiver (builder/gitserver), the build of a commit into an OCI image
// with stack detection and image assembly (builder/build). It holds no code
// of its own; the bex-git command (cmd/bex-git/app) serves the receiver in a
// cluster deployment.
//
// The packages below it own one step each. The release pipeline
// (internal/pipeline) joins them: it is the git receiver's Deployer, calls
// builder/build for each push of a deploy branch, and records the build and
// the release; the wiring (cmd/bex-git/app, internal/embedded) hands it to
// the receiver.
package builder
