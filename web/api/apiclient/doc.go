// Package apiclient is the Go client of bex's platform API (package
// web/api): the JSON types that travel under /api/v1 and a Client that
// calls each route with a bearer token. The CLI (cmd/bex/app) is built on
// it; tests and other tools may use it too. It depends on nothing but the
// standard library, so that the CLI stays small.
//
// Errors the API answers with come back as *Error, which carries the HTTP
// status, the message and, for bad input, the field at fault.
package apiclient
