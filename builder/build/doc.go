// Package build turns one commit of a tenant's repository into an OCI image
// in the platform registry, the way Heroku's buildpacks do: it checks the
// commit out into a fresh work directory, detects the stack (Go, Node,
// Python, static site, Procfile, or Dockerfile through BuildKit), runs the
// stack's build commands with a clean environment and a time limit, and
// pushes the result as an image whose files live under /app: one layer on
// the run image (Options.RunImage, the base that carries /bin/sh and the
// stacks' runtimes, which a container needs), or on nothing at all for the
// process runtime, which runs the app on its host.
//
// The git receiver calls Builder.Build and streams the log it writes, line by
// line, to the pusher; the release records the Result (image digest and
// process commands). The pipeline calls Unpack to turn an image back into a
// directory a runtime can run, with the environment the image asks for: its
// /app, or, for a Dockerfile image, its whole root filesystem.
//
// What the builder reads or writes of the checkout itself (stack files, the
// Procfile, the files it packs) goes through an os.Root at the checkout, so
// no symbolic link, nor chain of links, leads it outside; a link that would
// fails the build with a *LinkError naming it (tree.go).
//
// Builds of the stacks run the tenant's own commands in containers of the
// tenant when Options.Sandbox is set (command.go), with a CPU quota and a
// memory limit, and with the build's work directory and the tenant's caches
// on file systems of bounded size (disk.go, internal/loopfs); without it, as
// the builder's user, with nothing beyond the clean environment, the work
// directory and the time limit. A Dockerfile's steps run in buildkitd's runc
// containers, with no network. See docs/builds.md.
package build
