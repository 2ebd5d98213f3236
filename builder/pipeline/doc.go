// Package pipeline turns a push into a running release: it is the git
// receiver's Deployer.
//
// For a push it records a build in the store, runs the builder with the
// build's output going both to the pusher (through the git side-band) and to
// the store, hands the image to its release.Releaser to roll out, records the
// release — numbered, immutable — only once the runtime reports it healthy,
// and has the Releaser write the App's status.currentRelease and status.url.
// A failed build or rollout changes nothing that is running; a build's image
// is queued for deletion at once, and kept only once a release runs it.
//
// A Pipeline embeds its Releaser, so the process that builds rolls back and
// keeps releases running with the same per-app lock. Processes that never
// build (the controller manager, bex-web) hold a release.Releaser alone and
// construct no builder.
package pipeline
