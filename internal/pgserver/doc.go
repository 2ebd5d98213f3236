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
// Every connection, over TCP or the Unix socket, presents the password of the
// superuser role postgres (SCRAM-SHA-256): any process on the machine may
// reach 127.0.0.1, a tenant's included. The password is random, kept in
// Options.PasswordFile (DataDir + ".password" by default, mode 0600) and
// carried by Server.URL. Start sets it in single-user mode, which listens on
// no socket, and writes pg_hba.conf before the server listens; a data
// directory from before (initdb --auth=trust) is upgraded that way on its
// next start. The server is meant for embedded mode (make run, data under
// .bex/) and for tests, never for production.
//
// pgserver hands a connection URL (Server.URL) to whoever needs a database:
// embedded mode gives it to internal/store, and internal/pgtest uses it as its
// last fallback when no other server is reachable.
package pgserver
