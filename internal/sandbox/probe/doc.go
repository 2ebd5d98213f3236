// Command probe is what the sandbox's tests run inside containers, as a
// hostile tenant would: it reads paths, dials addresses, serves HTTP,
// allocates memory and forks, and prints what happened, one line each.
// Built static (CGO_ENABLED=0), it runs on the run base and on an image
// FROM scratch alike.
package main
