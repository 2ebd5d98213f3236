// Package bytesize renders byte counts the way a person reads a limit
// ("200 MiB"), for the messages that name one: a push over the size limit,
// a checkout that expands too far, a request body too large. It owns no
// limits itself.
package bytesize
