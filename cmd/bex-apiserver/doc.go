// Command bex-apiserver is the platform's scheduler API server; its command
// line lives in bex.co/bex/cmd/bex-apiserver/app, the server in
// bex.co/bex/apiserver.
package main
