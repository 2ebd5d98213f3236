// Command testreport reads `go test -json` from its standard input and
// prints what `go test` prints without -json (a line per package, the
// output of the tests that failed), then where the suite's time went: the
// slowest packages and tests, the run's wall time and how busy the
// machine's cores were meanwhile. Every 5 minutes it says how far the run
// is: make test starts the slowest packages first, and while they hold go
// test's places (-p, 2 on two cores) no other package ends.
//
// make test pipes the whole suite through it (hack/test.sh), so that
// every run, CI's too, says which packages to make faster; -times writes
// every package's and test's time to a file.
//
// It exits 0 even when tests fail: the caller takes the outcome from go
// test's own exit status.
package main
