// Package pgserver runs a private PostgreSQL server from the system's server
// binaries (Debian's /usr/lib/postgresql/<major>/bin, else $PATH).
//
// It owns one data directory and one postgres process: Start initialises the
// directory with initdb only when it is empty, so a second Start on the same
// directory keeps its data; it then starts postgres on 127.0.0.1 and returns
// once the server accepts connections. When the caller is root the server runs
// as the "postgres" system user, because PostgreSQL refuses to run as root.
// The server is stopped by Stop, and on Linux also when the process that
// started it dies.
//
// Authentication is "trust" for local connections as user postgres: the
// server is meant for embedded mode (make run, data under .bex/) and for
// tests, never for production.
//
// pgserver hands a connection URL (Server.URL) to whoever needs a database:
// embedded mode gives it to internal/store, and internal/pgtest uses it as its
// last fallback when no other server is reachable.
package pgserver
