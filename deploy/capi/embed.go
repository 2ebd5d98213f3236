package capi

import (
	"embed"
	"io/fs"
)

//go:embed hetzner/*.yaml
var files embed.FS

// Hetzner returns deploy/capi/hetzner: cluster-template.yaml and
// stock-kcp.yaml, with their clusterctl ${VARIABLES} unsubstituted.
func Hetzner() fs.FS {
	sub, err := fs.Sub(files, "hetzner")
	if err != nil {
		panic(err) // the embed pattern guarantees the directory
	}
	return sub
}
