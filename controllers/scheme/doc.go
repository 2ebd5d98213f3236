// Package scheme builds the runtime.Scheme of every kind bex's controllers
// read. It imports only API types, so that a test helper may use it
// without the controllers (and what they run) coming along.
package scheme
