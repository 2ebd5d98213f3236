// Package secretfile keeps the generated secrets of the platform's own
// services in files only their owner reads (mode 0600): the private Postgres
// server's password (internal/pgserver) and the platform registry's token
// (internal/registry, handed by cmd/bex-embedded/app to the builder and to
// Unpack). A secret is random text that needs no quoting in a URL, a SQL
// string or an HTTP header.
package secretfile
