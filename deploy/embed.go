package deploy

import (
	"embed"
	"io/fs"
)

//go:embed crds/*.yaml
var crds embed.FS

// CRDs returns the platform's CustomResourceDefinitions, one YAML file each.
func CRDs() fs.FS {
	sub, err := fs.Sub(crds, "crds")
	if err != nil {
		panic(err) // the embed pattern guarantees the directory
	}
	return sub
}
