// Package builder groups what turns a tenant's git push into a release: the git
// receiver (builder/gitserver), stack detection, and image assembly.
//
// The packages below it own one step each; the lead's wiring hands the git
// receiver a Deployer that runs the build and records the release.
package builder
