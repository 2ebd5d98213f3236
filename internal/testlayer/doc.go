// Package testlayer makes image layers for tests: an uncompressed tar of
// directories and files in memory, as a go-containerregistry layer, for the
// base, run and app images that tests of the builder, the runtimes and the
// image publisher push to a registry. It is for tests only.
package testlayer
