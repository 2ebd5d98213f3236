// Package servetest plays the clients an HTTP server's timeouts are for,
// against a real listener: one that drips its request headers forever
// (slow loris) and one that keeps a connection open after its answer. Each
// fails the test unless the server hangs up within a deadline; the
// timeouts under test are the short ones a test configures.
package servetest
