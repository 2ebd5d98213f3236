package installcrds

import (
	"embed"
	"io/fs"
)

//go:embed *.yaml
var files embed.FS

// CRDs returns the CRDs, one YAML file each, for kubeapply.InstallCRDs.
func CRDs() fs.FS { return files }
