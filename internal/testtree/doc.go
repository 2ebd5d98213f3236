// Package testtree writes trees of files and symbolic links for tests: the
// repositories, checkouts and site directories that tests of the builder and
// the static server build, hostile links included. It is for tests only.
package testtree
