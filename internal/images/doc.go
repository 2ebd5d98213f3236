// Package images builds the container images the Helm chart deploy/chart/bex
// runs, one per component (bex-controller-manager, bex-apiserver, bex-web,
// bex-git, bex-edge), without Docker: ko-style, it cross-compiles each
// component's main package from this module's source with `go build
// -trimpath` and CGO_ENABLED=0, lays the binary at /usr/local/bin/<name> on a
// base image, and pushes the result with go-containerregistry.
//
// What a component's image is laid on follows what its binary needs at run
// time (Component.Base): bex-apiserver and bex-edge need only CA
// certificates and a user, so they go on a minimal base built here (or one
// the caller names); bex-controller-manager and bex-web check for git at
// start (the release pipeline's builder), and bex-git builds apps in its own
// process with git and the stacks' toolchains, so those go on base images
// the caller names. Nothing here guesses such a base.
//
// Every image runs its binary as entrypoint (the chart passes only args) as
// user 65532:65532 (the chart's runAsUser), and carries the OCI labels
// version, revision and source. Several platforms make an OCI image index.
//
// The package also reads what the chart says about the images (its
// appVersion, the default tag; its source URL) so that the command
// cmd/bex-images/app pushes the references the chart renders.
package images
