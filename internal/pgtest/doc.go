// Package pgtest gives each test a fresh, empty PostgreSQL database on a real
// server, and drops it when the test ends.
//
// The server is chosen once per test process, in this order:
//
//  1. BEX_TEST_DATABASE_URL, when set: an admin URL (a role that may CREATE
//     and DROP DATABASE). If it does not work the test fails; there is no
//     fallback from an explicit choice.
//  2. The machine's server: postgres://postgres@127.0.0.1:5432/postgres, then
//     the Unix socket in /var/run/postgresql, as user postgres.
//  3. A private server started from the system's binaries with
//     internal/pgserver in a temporary directory, stopped and removed by Main
//     (use it from TestMain), or killed with the test process otherwise.
//
// When none works the test fails with what to install or which variable to
// set. pgtest hands database URLs to tests of internal/store and of anything
// else that needs Postgres.
//
// The chosen server is the package's one piece of process-wide state: tests
// in one process share it, as they would share the machine's server.
package pgtest
