// Command bex-apiserver is the platform's scheduler API server; all it does
// lives in bex.co/bex/apiserver.
package main
