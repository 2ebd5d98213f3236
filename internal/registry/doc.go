// Package registry is the platform's embedded OCI registry: the one the
// builder pushes images to and the runtimes pull them from under `make run`.
//
// It is go-containerregistry's pkg/registry with its storage moved to disk, so
// that images survive a restart: blobs live content-addressed under
// <dir>/blobs/sha256/, and every manifest reference (tag or digest) that a
// push creates is recorded under <dir>/manifests/<repository>/ and replayed
// into the registry when New opens the directory again.
//
// Repository names and references are checked against the distribution
// specification's grammar before anything is written, so a request cannot
// reach outside dir.
//
// Every request presents the registry's token (HTTP basic authentication as
// Username, see Auth), even on loopback, where any process of the machine,
// a tenant's included, may connect: one without it gets 401 with a
// WWW-Authenticate challenge and changes nothing. Embedded mode keeps the
// token in the state directory (internal/secretfile) and hands it to the
// builder, which pushes, and to Unpack, which pulls; tenants never get it.
package registry
