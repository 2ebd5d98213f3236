// Package app is the bex-apiserver command: its command line (the options
// of bex.co/bex/apiserver and klog's flags) parsed, completed and validated
// through cmd/internal/command, then the server run until the context
// ends. What the server is and serves lives in bex.co/bex/apiserver.
package app
