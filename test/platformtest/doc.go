// Package platformtest runs the embedded platform (bex-embedded, what make
// run starts) as an end-to-end test's subject: it builds the binaries, starts
// the platform on a state directory, waits for its env file, and stops it as
// Ctrl-C does.
package platformtest
